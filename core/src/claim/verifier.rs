//! The verifier route of the assess position: instead of one model call asked for a 3-way
//! verdict, the check asks MiniCheck's Yes/No question about each of the top `k` passages (or
//! chunks of long ones), reads `P(Yes)` from the first token's probabilities, and a small,
//! fitted model turns the scores and a few lexical features into the verdict, a confidence and
//! the citations. The pipeline around it is the same (citation check, research only if
//! `insufficient`, reassessment by the same route, summary).
//!
//! The parts, in the order a check uses them:
//!
//! 1. [`plan`]: which questions to ask, known before the first one is: the first `k` passages
//!    of the evidence, each cut into chunks of at most `chunkChars` characters by
//!    [`chunk_bounds`] and its chunks ranked by the claim's content words they hold; every
//!    passage's best chunk is asked, and when there are fewer than `k` passages their other
//!    chunks fill the places left, the most words first; before them (once per check, when
//!    `calibrate`, the default) the claim alone, with an empty document: the model's prior
//!    ([`Question::prior`]). So at most `k + 1` questions. Other chunks are not asked (the
//!    report says how many chunks a passage had).
//! 2. One model call per question ([`crate::claim::prompt::verifier_prompt`], a one-token
//!    answer with its `top_logprobs`: [`crate::Probe`]).
//! 3. [`read_answer`]: `S = P(Yes) / (P(Yes) + P(No))`, summing the case and space variants of
//!    both words (`" Yes"`, `"yes"`, `"YES"`, ...). Probabilities that cannot be used
//!    ([`ProbabilityIssue`]: none reported, as Anthropic; not finite; neither word among them)
//!    fall back to the sampled token (Yes is 1, No is 0); a token that is neither leaves the
//!    question's score unknown. Never a panic.
//! 4. [`decide`]: the features ([`Features`]) and the verdict from the scores, with
//!    [`VerifierWeights`].
//!
//! # The scoring model
//!
//! A passage's score is the highest `S` over its asked chunks, and its text for the lexical
//! features below is that chunk's ([`best_chunks`]): the part the model judged. A model says
//! Yes to some claims whatever the document (a claim that sounds true), so each score is read
//! against the model's prior `S0`, its answer about the claim with an empty document
//! ("contextual calibration", Zhao et al. 2021): `logit(S) - logit(S0)` is what the passage
//! itself moved.
//! `S0` counts only when read from probabilities ([`prior_score`]); otherwise it is taken as
//! 0.5 (logit 0). Six features describe a claim:
//!
//! | name | what |
//! |---|---|
//! | `calibratedMaxS` | `logit(S) - logit(S0)` of the best-scored passage (each clamped to `[c, 1 - c]`, `c` the file's `scoreClamp`; 0 when no score is known) |
//! | `calibratedTopicS` | the same of the *topic passage*: among the passages whose `S` is known (all of them if none is), the one holding the largest share of the claim's content words (ties: the higher `S`, then the earlier) |
//! | `overlap` | the share of the claim's content words ([`crate::retrieve::bm25_terms`]) found in the topic passage |
//! | `missingNumbers` | the share of the claim's numbers absent from the topic passage (0 when the claim has none) |
//! | `hasNumber` | 1 when the claim has a number, else 0 |
//! | `comparedNumbers` | the claim's bounds on numbers ("more than 1,500 cases") against the topic passage's numbers ([`compare_numbers`]): 1 they hold, -1 one fails, 0 nothing to compare |
//!
//! The calibrated logit of `S` carries most of the signal and holds on any kind of text; the lexical
//! features are cheap and help tell `contradicted` (a passage about the claim that says
//! otherwise, often with another number) from `insufficient` (nothing about it), but they are
//! partly a quirk of VitaminC, so they are kept few and linear. `comparedNumbers` is
//! arithmetic a small model does not do: it gave the dev claims bounded by "more than" or
//! "fewer than" about the same low `S` whether the passage's number kept the bound or broke
//! it. It is decided only where the passage's numbers agree (a number with the bound's unit,
//! or else near the bound), and is 0 elsewhere, as on most text.
//!
//! Each class `c` has a linear score `z_c = bias_c + w_c · x`; the probabilities are their
//! softmax. `insufficient` is derived, never asked of the model: the verdict is the most
//! probable class, `supported` only when `P(supported)` also reaches its threshold, and
//! `contradicted` only when `P(contradicted)` reaches its threshold and the topic passage
//! holds at least `topicOverlap` of the claim's content words (a passage not about the claim
//! cannot contradict it; VitaminC, whose passages are all about their claims, cannot teach a
//! linear model that); otherwise `insufficient` (no passage supports or contradicts enough).
//! Ties go to `supported`, then `contradicted`. The confidence is the verdict's probability,
//! and for `insufficient` `1 - max(P(supported), P(contradicted))`.
//!
//! A sentence of an answer (or one of its atomic claims) is decided by another rule
//! ([`Rule::AnswerSentence`], [`decide_by`]): `supported` when its support reaches the file's
//! `answerSupported`, whichever class is the most probable; otherwise as a claim. An answer is
//! faithful only when every one of its sentences holds, so the claim's rule, which misses some
//! supported claims, misses more answers the more sentences they have; the answer's threshold
//! trades that against the wrong sentences it lets through, and is fitted on answers composed
//! from dev claims. The support is `P(holds)`, the file's answer model (`answer`: a logistic
//! regression of supported claims against contradicted ones, on the same features), when the
//! file has one, else `P(supported)`. The three classes' `P(supported)` is the wrong
//! question for an answer: its `overlap` feature, which tells a claim the corpus is silent
//! about, also pulls down supported claims worded apart from their passage, and a wrong
//! sentence in an answer is most often a contradicted one. On the 300 dev claims, the answer
//! model raised the composed answers' expected balanced accuracy, with the threshold too
//! chosen on held-out folds, from 0.708 to 0.740 for Qwen-1.5B, and left the 0.5B's as it was
//! (0.625 and 0.627; docs/BENCHMARKS.md). The report's `verifier.holds` and the rationale say
//! `P(holds)` where it decided. A sentence judged on chunks of a longer passage (an answer checked
//! against a document, as a summary against its article) has a threshold of its own,
//! `answerSupportedInChunk` ([`Rule::AnswerSentenceInChunk`]): a model's `S` for a sentence
//! read among others is lower than for the sentence alone, so the passages' threshold misses
//! supported sentences of a document.
//!
//! Citations are the passages that decided, each once, quoted whole: for `supported` every
//! asked passage whose `S` reaches `citeSupport` (at least the best-scored one), for
//! `contradicted` the topic passage. A conclusive verdict needs a passage the model judged:
//! when no score is known, the verdict is `insufficient`.
//!
//! # The weights files
//!
//! The weights and thresholds are data, one file per model they were fitted on (a model's `S`
//! is on its own scale): `core/src/claim/verifier-weights-<model id>.json`, compiled in
//! ([`BuiltinWeights`], named by the options' `weights`; Qwen-0.5B's are the default) and
//! rewritten by a fitting command. Their format (version 1):
//!
//! ```json
//! {
//!   "format": 1,
//!   "fitted": false,
//!   "note": "what was fitted on, when, with what result (free text)",
//!   "features": ["calibratedMaxS", "calibratedTopicS", "overlap", "missingNumbers", "hasNumber",
//!                "comparedNumbers"],
//!   "classes": {
//!     "supported":    {"bias": -0.5, "weights": [1.2, 0.0, 1.0, -2.0, 0.0, 2.0]},
//!     "contradicted": {"bias": -3.5, "weights": [0.0, -0.6, 4.0, 1.0, 0.0, -1.0]},
//!     "insufficient": {"bias": 0.0,  "weights": [0.0, 0.0, 0.0, 0.0, 0.0, 0.0]}
//!   },
//!   "thresholds": {"supported": 0.5, "contradicted": 0.5, "citeSupport": 0.5,
//!                  "topicOverlap": 0.3, "answerSupported": 0.3},
//!   "answer": {"bias": -0.7, "weights": [1.0, 0.0, 0.0, 0.0, 0.0, 3.0]},
//!   "scoreClamp": 0.001
//! }
//! ```
//!
//! `features` must be exactly [`FEATURES`], in that order, or their first five (a file fitted
//! before `comparedNumbers`, which is then read with its weight 0: it decides as it did); a
//! file written for other features is refused, not misread. Each class, and the answer model
//! (optional), has one weight per feature the file names; every number is finite;
//! thresholds are in `[0, 1]` (`answerSupported` may be left out: an answer's sentences are
//! then decided as claims; `answerSupportedInChunk` too: `answerSupported` then holds on
//! chunks); `scoreClamp` is in `(0, 0.5)`. A multinomial logistic
//! regression fitted with `insufficient` as the reference class writes its weights as zeros.
//!
//! The files in the repository were fitted by `cargo xtask fit --model M`
//! (`tests/src/bin/fit/`) on VitaminC's 300 dev claims with each model's scores
//! (`"fitted": true`; a file's `note` gives its cross-validated figures): every class on
//! `calibratedMaxS`, `overlap`, `missingNumbers` and `comparedNumbers`, the verdict the most
//! probable class (thresholds 0), `contradicted` gated at a topic overlap of 0.3; the answer
//! model (Qwen-1.5B's file) on `calibratedMaxS` and `comparedNumbers`, fitted on the
//! supported and contradicted claims;
//! `answerSupported` the threshold on its `P(holds)` with the best expected balanced accuracy
//! over answers of three dev claims (faithful: three supported; hallucinated: two supported
//! and one contradicted), each claim's `P(holds)` taken from the cross-validation fold that
//! did not see it;
//! `answerSupportedInChunk` chosen the same way, with the weights as fitted, on the same dev
//! claims each set inside a document (`cargo xtask fit --model M --claims
//! tests/fixtures/documents/claims-dev-documents.jsonl -- --chunked-answers`).

use std::sync::OnceLock;

use serde::de::Error as _;
use serde::{Deserialize, Deserializer, Serialize};
use serde_json::Value;

mod answer;
mod compare;
mod questions;
mod scoring;

pub use answer::{ProbabilityIssue, Reading, ScoreSource, read_answer, yes_no_score};
pub use compare::{Comparison, compare_numbers, compared_numbers};
pub use questions::{Question, chunk_bounds, chunk_relevance, plan};
use scoring::usable;
pub use scoring::{
    ClassProbabilities, Classes, Decision, FEATURES, Features, Linear, Rule, ScoredPassage,
    Thresholds, VerifierWeights, decide, decide_by, features,
};

/// Passages asked about when the configuration does not say.
pub const DEFAULT_K: usize = 3;
/// The most passages a configuration may ask about.
pub const MAX_K: usize = 20;
/// How many first tokens to ask for when the configuration does not say.
pub const DEFAULT_TOP_LOGPROBS: u8 = 10;
/// The longest chunk asked about, in characters, when the configuration does not say: about
/// 150 tokens of English, a few sentences. MiniCheck's trained checkers read chunks of about 500
/// tokens; a small instruction model judges a claim's sentence worse among 2,000 characters of
/// other text (long dev documents with Qwen-0.5B, 60 claims: 0.333
/// accuracy and 0.54 binary balanced accuracy at 2,000 characters, 0.433 and 0.60 at 600, 0.433
/// and 0.61 at 300; docs/BENCHMARKS.md). VitaminC's passages are nearly all shorter (115 of
/// 26,259 are longer).
pub const DEFAULT_CHUNK_CHARS: usize = 600;
/// The shortest chunk a configuration may ask for.
pub const MIN_CHUNK_CHARS: usize = 200;

/// The verifier route's options. JSON (camelCase, every field optional):
/// `{"k": 3, "topLogprobs": 10, "chunkChars": 600, "calibrate": true,
/// "weights": "qwen2.5-coder-0.5b-instruct"}`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default, deny_unknown_fields)]
pub struct VerifierOptions {
    /// How many of the retrieved passages are asked about, best first (1 to [`MAX_K`]).
    #[serde(deserialize_with = "bounded_k")]
    pub k: usize,
    /// How many of the most likely first tokens the provider reports (1 to 20).
    #[serde(deserialize_with = "bounded_top")]
    pub top_logprobs: u8,
    /// The longest chunk of a passage asked about, in characters (at least
    /// [`MIN_CHUNK_CHARS`]).
    #[serde(deserialize_with = "bounded_chunk")]
    pub chunk_chars: usize,
    /// Whether the claim is also asked about with an empty document, once per check: the
    /// model's prior, against which each passage's `S` is read (see the module docs).
    pub calibrate: bool,
    /// The weights the scores are read with: those fitted on the model asked
    /// ([`BuiltinWeights`]); a model's scores are on its own scale.
    pub weights: BuiltinWeights,
}

/// The weights files in the repository, one per model they were fitted on: a model's `S` is
/// on its own scale (weights fitted on Qwen-0.5B's scores lose about 4 points of 3-way accuracy on
/// the 1.5B's, cross-validated on dev; docs/BENCHMARKS.md). Named in a configuration by the
/// model's id.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub enum BuiltinWeights {
    /// Fitted on Qwen2.5-Coder-0.5B-Instruct's scores (the default: the smallest model the
    /// presets name, and the model in the tab).
    #[default]
    #[serde(rename = "qwen2.5-coder-0.5b-instruct")]
    Qwen25Coder05b,
    /// Fitted on Qwen2.5-Coder-1.5B-Instruct's scores.
    #[serde(rename = "qwen2.5-coder-1.5b-instruct")]
    Qwen25Coder15b,
}

impl BuiltinWeights {
    /// Every builtin weights file, in order.
    pub const ALL: [Self; 2] = [Self::Qwen25Coder05b, Self::Qwen25Coder15b];

    /// The model id that names it.
    #[must_use]
    pub fn name(self) -> &'static str {
        match self {
            Self::Qwen25Coder05b => "qwen2.5-coder-0.5b-instruct",
            Self::Qwen25Coder15b => "qwen2.5-coder-1.5b-instruct",
        }
    }

    /// The file's JSON as compiled in: the repository's file without its `note` (how it was
    /// fitted, in words) and without whitespace between tokens (`core/build.rs`).
    #[must_use]
    pub fn text(self) -> &'static str {
        match self {
            Self::Qwen25Coder05b => {
                include_str!(concat!(
                    env!("OUT_DIR"),
                    "/verifier-weights-qwen2.5-coder-0.5b-instruct.json"
                ))
            }
            Self::Qwen25Coder15b => {
                include_str!(concat!(
                    env!("OUT_DIR"),
                    "/verifier-weights-qwen2.5-coder-1.5b-instruct.json"
                ))
            }
        }
    }

    /// The weights, read once.
    ///
    /// # Panics
    /// Never for the files in the repository (a test reads each).
    #[must_use]
    pub fn weights(self) -> &'static VerifierWeights {
        static WEIGHTS: [OnceLock<VerifierWeights>; 2] = [OnceLock::new(), OnceLock::new()];
        let index = Self::ALL.iter().position(|w| *w == self).unwrap_or(0);
        WEIGHTS[index].get_or_init(|| {
            VerifierWeights::from_json(self.text())
                .expect("the repository's verifier weights are valid")
        })
    }
}

impl Default for VerifierOptions {
    fn default() -> Self {
        Self {
            k: DEFAULT_K,
            top_logprobs: DEFAULT_TOP_LOGPROBS,
            chunk_chars: DEFAULT_CHUNK_CHARS,
            calibrate: true,
            weights: BuiltinWeights::default(),
        }
    }
}

/// A number of at least `min` and at most `max` (when there is one), or a deserialization
/// error saying so: the one reader of the options' bounded numbers.
fn bounded<'de, D, T>(deserializer: D, min: T, max: Option<T>) -> Result<T, D::Error>
where
    D: Deserializer<'de>,
    T: Deserialize<'de> + PartialOrd + std::fmt::Display,
{
    let value = T::deserialize(deserializer)?;
    match max {
        Some(max) if value < min || value > max => {
            Err(D::Error::custom(format!("must be {min} to {max}, not {value}")))
        }
        None if value < min => {
            Err(D::Error::custom(format!("must be at least {min}, not {value}")))
        }
        _ => Ok(value),
    }
}

fn bounded_k<'de, D: Deserializer<'de>>(deserializer: D) -> Result<usize, D::Error> {
    bounded(deserializer, 1, Some(MAX_K))
}

fn bounded_top<'de, D: Deserializer<'de>>(deserializer: D) -> Result<u8, D::Error> {
    bounded(deserializer, 1, Some(crate::provider::openai::MAX_TOP_LOGPROBS))
}

fn bounded_chunk<'de, D: Deserializer<'de>>(deserializer: D) -> Result<usize, D::Error> {
    bounded(deserializer, MIN_CHUNK_CHARS, None)
}

/// Which route the assess position takes. JSON: `"agent"` (the default: one model call
/// records a 3-way assessment), `"verifier"` (the verifier route with default options) or
/// `{"verifier": {"k": 3, "topLogprobs": 10, "chunkChars": 600, "calibrate": true}}`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
#[non_exhaustive]
pub enum AssessMode {
    /// One model call records the assessment (`record_assessment`).
    #[default]
    Agent,
    /// One Yes/No question per passage, scored from the token probabilities.
    Verifier(VerifierOptions),
}

impl AssessMode {
    /// Whether this is the default mode (a configuration leaves it out when serialized).
    #[must_use]
    pub fn is_agent(&self) -> bool {
        *self == AssessMode::Agent
    }
}

impl<'de> Deserialize<'de> for AssessMode {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let expected = "\"agent\", \"verifier\" or {\"verifier\": {...}}";
        match Value::deserialize(deserializer)? {
            Value::String(name) if name == "agent" => Ok(AssessMode::Agent),
            Value::String(name) if name == "verifier" => {
                Ok(AssessMode::Verifier(VerifierOptions::default()))
            }
            Value::Object(mut fields) if fields.len() == 1 => {
                if let Some(options) = fields.remove("verifier") {
                    let options = if options.is_null() {
                        VerifierOptions::default()
                    } else {
                        VerifierOptions::deserialize(options).map_err(D::Error::custom)?
                    };
                    return Ok(AssessMode::Verifier(options));
                }
                if fields.remove("agent").is_some_and(|value| value.is_null()) {
                    return Ok(AssessMode::Agent);
                }
                Err(D::Error::custom(format!("unknown assess mode: {expected}")))
            }
            other => Err(D::Error::custom(format!("{other} is not an assess mode: {expected}"))),
        }
    }
}

/// One asked question in the report: which passage, which chunk, and what the answer said.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AskedQuestion {
    /// The question.
    #[serde(flatten)]
    pub question: Question,
    /// What its answer said.
    #[serde(flatten)]
    pub reading: Reading,
}

/// `S0`, the calibration question's score among `asked`, when it was read from probabilities:
/// a sampled Yes or No (a provider without probabilities) is no prior to calibrate by (it
/// would move every passage's `logit(S)` by the clamp's whole range), so it is left out, as
/// is an unknown one.
#[must_use]
pub fn prior_score(asked: &[AskedQuestion]) -> Option<f64> {
    asked
        .iter()
        .find(|asked| asked.question.prior)
        .filter(|asked| asked.reading.source == ScoreSource::Probabilities)
        .and_then(|asked| usable(asked.reading.score))
}

/// Whether any passage asked about in `asked` was a chunk of a longer one (a document): an
/// answer's sentence is then decided by [`Rule::AnswerSentenceInChunk`]. The route and
/// `cargo xtask fit --chunked-answers` both ask this.
#[must_use]
pub fn judged_on_chunks(asked: &[AskedQuestion]) -> bool {
    asked.iter().any(|a| !a.question.prior && a.question.chunks > 1)
}

/// Each passage of `evidence` asked about in `asked`, once, in the order first asked, as its
/// index and its best chunk: the text of the chunk with the highest known `S` (the first asked
/// when none is known) and that `S` (finite only). The features read the part the model
/// judged, not the passage around it: on a passage of one chunk they are the same. Questions
/// about items or parts that `evidence` lacks (a damaged saved state) are left out.
#[must_use]
pub fn best_chunks<'a>(
    evidence: &'a [String],
    asked: &[AskedQuestion],
) -> Vec<(usize, ScoredPassage<'a>)> {
    let mut best: Vec<(usize, ScoredPassage<'a>)> = Vec::new();
    for asked in asked.iter().filter(|asked| !asked.question.prior) {
        let question = asked.question;
        let Some(text) =
            evidence.get(question.evidence).and_then(|t| t.get(question.start..question.end))
        else {
            continue;
        };
        let score = asked.reading.score.filter(|s| s.is_finite());
        match best.iter_mut().find(|(index, _)| *index == question.evidence) {
            Some((_, passage)) => {
                if score.is_some_and(|s| passage.score.is_none_or(|b| s > b)) {
                    *passage = ScoredPassage { text, score };
                }
            }
            None => best.push((question.evidence, ScoredPassage { text, score })),
        }
    }
    best
}

/// What the verifier route did, in the report: every question asked (both rounds), the
/// features and the class probabilities of the last decision. Its presence in a
/// [`crate::Report`] says the verifier route assessed.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct VerifierRecord {
    /// Every question, in the order asked; `evidence` indexes the evidence of the last
    /// assessment ([`crate::claim::ClaimCheck::evidence`]).
    pub questions: Vec<AskedQuestion>,
    /// The last decision's features.
    pub features: Features,
    /// The last decision's class probabilities.
    pub probabilities: ClassProbabilities,
    /// The last decision's `P(holds)`, when an answer's sentence was decided by the weights'
    /// answer model ([`VerifierWeights::answer`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub holds: Option<f64>,
    /// Whether any score came from the sampled token instead of probabilities (a provider
    /// without them, as Anthropic) or is unknown.
    pub fallback: bool,
    /// Whether the weights were fitted.
    pub fitted: bool,
}

#[cfg(test)]
mod tests {
    use std::collections::HashSet;

    use super::scoring::numbers;
    use super::*;
    use crate::claim::verdict::Verdict;
    use crate::message::{AssistantMessage, FirstToken, TokenLogprob};
    use serde_json::json;

    fn token(token: &str, logprob: f64) -> TokenLogprob {
        TokenLogprob { token: token.into(), logprob: Some(logprob) }
    }

    fn first(sampled: TokenLogprob, top: Vec<TokenLogprob>) -> FirstToken {
        FirstToken { sampled, top }
    }

    /// The claim and its passage of the tests of an answer's rules.
    const FERRY: &str = "The river ferry ran until 1966.";
    const FERRY_PASSAGE: &str = "The river ferry ran until 1966, when the bridge opened.";

    /// The hand-set weights the route began with: the tests of `decide`'s rules use them, so
    /// they hold whatever a refit writes into the repository's file.
    fn placeholder() -> VerifierWeights {
        VerifierWeights::from_json(
            r#"{"format": 1, "fitted": false, "features": ["calibratedMaxS", "calibratedTopicS",
                "overlap", "missingNumbers", "hasNumber"],
              "classes": {
                "supported": {"bias": -0.5, "weights": [1.2, 0.0, 1.0, -2.0, 0.0]},
                "contradicted": {"bias": -3.5, "weights": [0.0, -0.6, 4.0, 1.0, 0.0]},
                "insufficient": {"bias": 0.0, "weights": [0.0, 0.0, 0.0, 0.0, 0.0]}},
              "thresholds": {"supported": 0.5, "contradicted": 0.5, "citeSupport": 0.5},
              "scoreClamp": 0.001}"#,
        )
        .unwrap()
    }

    /// The repository's files, as written (the engine compiles them in without their notes).
    fn repository_file(builtin: BuiltinWeights) -> &'static str {
        match builtin {
            BuiltinWeights::Qwen25Coder05b => {
                include_str!("verifier-weights-qwen2.5-coder-0.5b-instruct.json")
            }
            BuiltinWeights::Qwen25Coder15b => {
                include_str!("verifier-weights-qwen2.5-coder-1.5b-instruct.json")
            }
        }
    }

    #[test]
    fn the_repository_weights_are_valid_and_fitted_each_on_its_own_model() {
        for builtin in BuiltinWeights::ALL {
            let weights = builtin.weights();
            assert!(weights.fitted);
            let file = VerifierWeights::from_json(repository_file(builtin)).unwrap();
            assert!(file.note.contains("cargo xtask fit"), "{}", file.note);
            assert!(file.note.contains(builtin.name()), "{}", file.note);
            // What is compiled in is the file, its note aside, number for number.
            assert!(weights.note.is_empty(), "{}", weights.note);
            assert_eq!(&VerifierWeights { note: String::new(), ..file }, weights);
            let compiled: Value = serde_json::from_str(builtin.text()).unwrap();
            let mut written: Value = serde_json::from_str(repository_file(builtin)).unwrap();
            written.as_object_mut().unwrap().remove("note");
            assert_eq!(compiled, written);
            assert!(!builtin.text().contains(char::is_whitespace), "minified");
            assert_eq!(weights.features, FEATURES);
            let round = serde_json::to_string(weights).unwrap();
            assert_eq!(&VerifierWeights::from_json(&round).unwrap(), weights);
            // The name a configuration uses is the one serde reads.
            let named: BuiltinWeights = serde_json::from_value(json!(builtin.name())).unwrap();
            assert_eq!(named, builtin);
        }
        assert_eq!(VerifierWeights::builtin(), BuiltinWeights::Qwen25Coder05b.weights());
    }

    #[test]
    fn the_options_name_the_weights_and_refuse_unknown_ones() {
        let mode: AssessMode =
            serde_json::from_value(json!({"verifier": {"weights": "qwen2.5-coder-1.5b-instruct"}}))
                .unwrap();
        let AssessMode::Verifier(options) = mode else { panic!("{mode:?}") };
        assert_eq!(options.weights, BuiltinWeights::Qwen25Coder15b);
        assert_eq!(options.k, DEFAULT_K, "the other options keep their defaults");
        let error = serde_json::from_value::<AssessMode>(json!({"verifier": {"weights": "gpt-4"}}))
            .unwrap_err()
            .to_string();
        assert!(error.contains("qwen2.5-coder-0.5b-instruct"), "names what it knows: {error}");
        // A configuration or saved state written before the option keeps the default.
        let mode: AssessMode = serde_json::from_value(json!({"verifier": {"k": 2}})).unwrap();
        let AssessMode::Verifier(options) = mode else { panic!("{mode:?}") };
        assert_eq!(options.weights, BuiltinWeights::Qwen25Coder05b);
    }

    #[test]
    fn the_verdict_is_the_most_probable_class_that_reaches_its_gates() {
        // Weights that make each class most probable in turn, by the calibrated score alone.
        let weights = |sup: f64, con: f64| {
            let mut w = placeholder();
            w.classes.supported = Linear { bias: sup, weights: vec![0.0; 5] };
            w.classes.contradicted = Linear { bias: con, weights: vec![0.0; 5] };
            w.classes.insufficient = Linear { bias: 0.0, weights: vec![0.0; 5] };
            w.thresholds.supported = 0.0;
            w.thresholds.contradicted = 0.0;
            w.thresholds.topic_overlap = 0.0;
            w
        };
        let claim = "The bridge opened in 1932.";
        let passages = [ScoredPassage { text: "The bridge opened in 1932.", score: Some(0.9) }];
        let verdict = |w: &VerifierWeights| decide(claim, &passages, None, w).verdict;
        assert_eq!(verdict(&weights(1.0, 0.0)), Verdict::Supported);
        assert_eq!(verdict(&weights(0.0, 1.0)), Verdict::Contradicted);
        // Insufficient the most probable: neither conclusive verdict, though contradicted
        // is more probable than supported (the old rule said contradicted here).
        assert_eq!(verdict(&weights(-2.0, -1.0)), Verdict::Insufficient);
        assert_eq!(verdict(&weights(-1.0, -2.0)), Verdict::Insufficient);
        // A tie between the conclusive two goes to supported.
        assert_eq!(verdict(&weights(1.0, 1.0)), Verdict::Supported);
        // Most probable but under its threshold: insufficient.
        let mut high = weights(1.0, 0.0);
        high.thresholds.supported = 0.9;
        assert_eq!(verdict(&high), Verdict::Insufficient);
        let mut high = weights(0.0, 1.0);
        high.thresholds.contradicted = 0.9;
        assert_eq!(verdict(&high), Verdict::Insufficient);
        // Most probable, but the passage is not about the claim.
        let mut gated = weights(0.0, 1.0);
        gated.thresholds.topic_overlap = 0.5;
        let unrelated = [ScoredPassage { text: "Tea grows in Assam.", score: Some(0.1) }];
        assert_eq!(decide(claim, &unrelated, None, &gated).verdict, Verdict::Insufficient);
    }

    #[test]
    fn a_weights_file_for_other_features_or_with_bad_numbers_is_refused() {
        let mut value: Value = serde_json::from_str(BuiltinWeights::default().text()).unwrap();
        value["features"][0] = json!("maxS");
        assert!(VerifierWeights::from_json(&value.to_string()).unwrap_err().contains("features"));
        let mut value: Value = serde_json::from_str(BuiltinWeights::default().text()).unwrap();
        value["classes"]["supported"]["weights"] = json!([1.0]);
        assert!(VerifierWeights::from_json(&value.to_string()).is_err());
        let mut value: Value = serde_json::from_str(BuiltinWeights::default().text()).unwrap();
        value["thresholds"]["supported"] = json!(1.5);
        assert!(VerifierWeights::from_json(&value.to_string()).is_err());
        let mut value: Value = serde_json::from_str(BuiltinWeights::default().text()).unwrap();
        value["extra"] = json!(1);
        assert!(VerifierWeights::from_json(&value.to_string()).is_err(), "unknown fields");
    }

    #[test]
    fn s_sums_the_variants_of_yes_and_no() {
        let ln = f64::ln;
        let answer = first(
            token("Yes", ln(0.5)),
            vec![
                token("Yes", ln(0.5)),
                token(" yes", ln(0.1)),
                token("No", ln(0.15)),
                token(" NO", ln(0.05)),
                token("The", ln(0.1)),
            ],
        );
        let s = yes_no_score(&answer).unwrap();
        assert!((s - 0.6 / 0.8).abs() < 1e-12, "{s}");
        // Only one word listed: the other counts as 0.
        let only_no = first(token("No", -0.01), vec![token("No", -0.01), token("Maybe", -5.0)]);
        assert_eq!(yes_no_score(&only_no), Ok(0.0));
        // The sampled token counts when the list leaves it out.
        let unlisted = first(token(" Yes", ln(0.3)), vec![token("No", ln(0.1))]);
        assert!((yes_no_score(&unlisted).unwrap() - 0.75).abs() < 1e-12);
        // -9999 (OpenAI's "very unlikely") is just very unlikely.
        let unlikely = first(token("Yes", -0.0), vec![token("Yes", 0.0), token("No", -9999.0)]);
        assert!(yes_no_score(&unlikely).unwrap() > 0.999_999);
    }

    #[test]
    fn bad_probabilities_are_typed_never_a_panic() {
        let nan = first(
            TokenLogprob { token: "Yes".into(), logprob: Some(f64::NAN) },
            vec![
                TokenLogprob { token: "Yes".into(), logprob: Some(f64::NAN) },
                TokenLogprob { token: "No".into(), logprob: Some(f64::INFINITY) },
                TokenLogprob { token: "no".into(), logprob: None },
            ],
        );
        assert_eq!(yes_no_score(&nan), Err(ProbabilityIssue::NotFinite));
        let neither = first(token("The", -0.2), vec![token("The", -0.2), token("I", -2.0)]);
        assert_eq!(yes_no_score(&neither), Err(ProbabilityIssue::NoYesNo));
        assert_eq!(yes_no_score(&first(token("", 0.0), vec![])), Err(ProbabilityIssue::NoYesNo));
        // A NaN beside a usable entry: the usable one decides.
        let mixed = first(
            token("Yes", -0.1),
            vec![token("Yes", -0.1), TokenLogprob { token: "No".into(), logprob: Some(f64::NAN) }],
        );
        assert_eq!(yes_no_score(&mixed), Ok(1.0));

        // Read from responses: fall back to the sampled token, else unknown.
        let text = AssistantMessage::text("No.");
        assert_eq!(
            read_answer(&text),
            Reading {
                score: Some(0.0),
                source: ScoreSource::SampledToken,
                issue: Some(ProbabilityIssue::Missing)
            }
        );
        let with_nan = AssistantMessage::text("Yes").with_first_token(nan);
        let reading = read_answer(&with_nan);
        assert_eq!(reading.score, Some(1.0));
        assert_eq!(reading.issue, Some(ProbabilityIssue::NotFinite));
        let prose = AssistantMessage::text("The document").with_first_token(neither);
        assert_eq!(
            read_answer(&prose),
            Reading {
                score: None,
                source: ScoreSource::Unknown,
                issue: Some(ProbabilityIssue::NoYesNo)
            }
        );
        assert_eq!(read_answer(&AssistantMessage::text("")).source, ScoreSource::Unknown);
    }

    #[test]
    fn a_nan_logprob_survives_a_save_as_unknown() {
        let nan = TokenLogprob { token: "Yes".into(), logprob: Some(f64::NAN) };
        let saved = serde_json::to_string(&nan).unwrap();
        let back: TokenLogprob = serde_json::from_str(&saved).unwrap();
        assert_eq!(back.logprob, None);
    }

    #[test]
    fn chunks_end_at_sentences_and_cover_the_text() {
        let sentence = "The ferry ran between the two towns for many years. ";
        let text = sentence.repeat(10);
        let bounds = chunk_bounds(&text, 200);
        assert!(bounds.len() > 1);
        for &(start, end) in &bounds {
            let chunk = &text[start..end];
            assert!(chunk.chars().count() <= 200, "{chunk:?}");
            assert!(chunk.ends_with('.'), "cut at a sentence end: {chunk:?}");
        }
        let joined: Vec<&str> = bounds.iter().map(|&(s, e)| &text[s..e]).collect();
        assert_eq!(joined.join(" "), text.trim_end());
        // No sentence end, no space: cut at the window, on a character boundary.
        let word = "é".repeat(450);
        let bounds = chunk_bounds(&word, 200);
        assert_eq!(bounds.len(), 3);
        assert_eq!(word[bounds[0].0..bounds[0].1].chars().count(), 200);
        assert_eq!(chunk_bounds("short", 200), vec![(0, 5)]);
        assert_eq!(chunk_bounds("", 200), vec![(0, 0)]);
    }

    #[test]
    fn the_plan_asks_at_most_k_plus_one_questions() {
        let long = "A sentence about the ferry. ".repeat(300);
        let evidence =
            vec!["short one".to_owned(), long.clone(), long, "fourth".to_owned(), "x".to_owned()];
        let options = VerifierOptions { chunk_chars: 1000, ..VerifierOptions::default() };
        let asked = |questions: &[Question]| -> Vec<(usize, usize, bool)> {
            questions.iter().map(|q| (q.evidence, q.chunk, q.prior)).collect()
        };
        // The prior first, then k passages' first chunks: no room for a second chunk.
        let questions = plan("the ferry", &evidence, &[0, 1, 2, 3, 4], &options, true);
        assert_eq!(questions.len(), options.k + 1);
        assert_eq!(asked(&questions), [(0, 0, true), (0, 0, false), (1, 0, false), (2, 0, false)]);
        assert!(questions[2].chunks > 2, "later chunks are counted, not asked");
        // Fewer than k passages: the best long one's second chunk fills a place.
        let few = plan("the ferry", &evidence, &[3, 1], &options, true);
        assert_eq!(asked(&few), [(0, 0, true), (3, 0, false), (1, 0, false), (1, 1, false)]);
        let short = plan("the ferry", &evidence, &[3, 0], &options, true);
        assert_eq!(short.len(), 3, "the prior and 2 passages, no spare without a long one");
        // The second round asks no prior again; without calibration there is none.
        assert_eq!(asked(&plan("the ferry", &evidence, &[3], &options, false)), [(3, 0, false)]);
        let plain = VerifierOptions { calibrate: false, ..options };
        assert_eq!(plan("the ferry", &evidence, &[0, 1, 2, 3], &plain, true).len(), plain.k);
        assert!(
            plan("the ferry", &evidence, &[], &options, true).is_empty(),
            "no passage: no question"
        );
    }

    #[test]
    fn a_long_passages_chunks_are_asked_by_the_claims_words_not_by_their_place() {
        // One document of six chunks; what the claim is about is in two of them, not the first.
        let filler = "The weather was mild and the harvest came in on time. ".repeat(18);
        let ferry = "A river ferry ran between the towns until 1966, when a bridge opened. ";
        let document = format!("{filler}{filler}{ferry}{filler}{filler}{ferry}{filler}");
        let evidence = vec![document.clone(), "short".to_owned()];
        let options = VerifierOptions { chunk_chars: 1000, ..VerifierOptions::default() };
        let claim = "A river ferry ran until 1966.";
        let bounds = chunk_bounds(&document, options.chunk_chars);
        assert!(bounds.len() >= 5, "{} chunks", bounds.len());
        let holds = |q: &Question| document[q.start..q.end].contains("ferry");
        // The only passage: k chunks, those with the claim's words first.
        let questions = plan(claim, &evidence, &[0], &options, false);
        assert_eq!(questions.len(), options.k);
        assert!(holds(&questions[0]) && holds(&questions[1]), "{questions:?}");
        assert!(questions.iter().all(|q| q.evidence == 0 && q.chunks == bounds.len()));
        let mut chunks: Vec<usize> = questions.iter().map(|q| q.chunk).collect();
        chunks.dedup();
        assert_eq!(chunks.len(), options.k, "each chunk asked once: {chunks:?}");
        // Beside another passage: the long one's best chunk, not its first.
        let two = plan(claim, &evidence, &[1, 0], &options, true);
        assert_eq!(two.len(), options.k + 1);
        assert_eq!((two[1].evidence, two[1].chunk), (1, 0));
        assert!(two[2..].iter().all(|q| q.evidence == 0 && holds(q)), "{two:?}");
        // A claim sharing no word with any chunk: the chunks in their order.
        let none = plan("Zebras graze.", &evidence, &[0], &options, false);
        assert_eq!(none.iter().map(|q| q.chunk).collect::<Vec<_>>(), [0, 1, 2]);
    }

    #[test]
    fn a_word_every_chunk_holds_counts_for_less_than_a_rare_one() {
        // Every chunk holds three of the claim's words: each holds "river", two hold "ran" and
        // "until", one "ferry" and "1966". Counted, they tie and the first would be asked.
        let first = "The river ran high until the spring came. ";
        let ferry = "The river ferry carried carts across in 1966. ";
        let last = "The river ran dry until the autumn rains. ";
        let document = format!("{}{}{}", first.repeat(5), ferry.repeat(5), last.repeat(5));
        let bounds = chunk_bounds(&document, 250);
        assert!(bounds.len() >= 3, "{bounds:?}");
        let terms =
            crate::retrieve::bm25_terms("A river ferry ran until 1966.").into_iter().collect();
        let relevance = chunk_relevance(&document, &bounds, &terms);
        let best =
            (0..bounds.len()).max_by(|&a, &b| relevance[a].total_cmp(&relevance[b])).unwrap();
        assert!(document[bounds[best].0..bounds[best].1].contains("ferry"), "{relevance:?}");
        assert!(relevance.iter().all(|r| r.is_finite() && *r >= 0.0));
        assert_eq!(chunk_relevance("one", &[(0, 3)], &terms), [0.0], "one chunk: nothing to rank");
        let outside = chunk_relevance("é ferry", &[(0, 1), (3, 8), (7, 99)], &terms);
        assert_eq!(outside.len(), 3, "bounds off the text hold nothing, and never panic");
        assert!(outside[0] == 0.0 && outside[1] > 0.0 && outside[2] == 0.0, "{outside:?}");
    }

    #[test]
    fn assess_mode_reads_its_three_forms_and_refuses_others() {
        let read = |v: Value| serde_json::from_value::<AssessMode>(v);
        assert_eq!(read(json!("agent")).unwrap(), AssessMode::Agent);
        assert_eq!(
            read(json!("verifier")).unwrap(),
            AssessMode::Verifier(VerifierOptions::default())
        );
        let mode = read(json!({"verifier": {"k": 5, "topLogprobs": 20}})).unwrap();
        assert_eq!(
            mode,
            AssessMode::Verifier(VerifierOptions {
                k: 5,
                top_logprobs: 20,
                ..VerifierOptions::default()
            })
        );
        assert_eq!(read(serde_json::to_value(mode).unwrap()).unwrap(), mode, "round trip");
        assert!(read(json!({"verifier": {"k": 0}})).is_err());
        assert!(read(json!({"verifier": {"topLogprobs": 21}})).is_err());
        assert!(read(json!({"verifier": {"chunkChars": 10}})).is_err());
        assert!(read(json!({"verifier": {"kk": 1}})).is_err());
        assert!(read(json!("judge")).is_err());
        assert!(read(json!(3)).is_err());
    }

    #[test]
    fn numbers_are_read_whole() {
        let found = numbers("In 1,117 cases (3.5%) from 1990s to 2001.");
        let expected: HashSet<String> =
            ["1117", "3.5", "1990", "2001"].into_iter().map(String::from).collect();
        assert_eq!(found, expected);
    }

    fn scored<'a>(items: &[(&'a str, Option<f64>)]) -> Vec<ScoredPassage<'a>> {
        items.iter().map(|&(text, score)| ScoredPassage { text, score }).collect()
    }

    #[test]
    fn the_fitted_weights_tell_a_supporting_passage_an_unrelated_one_and_a_contradicting_one_apart()
    {
        let weights = VerifierWeights::builtin();
        let claim = "The river ferry ran until 1966.";
        let supports = "The river ferry ran until 1966, when the bridge opened.";
        let contradicts = "The river ferry ran until 1972, when the bridge opened.";
        let unrelated = "The town hall was rebuilt in brick after the fire.";
        let supported = decide(
            claim,
            &scored(&[(unrelated, Some(0.05)), (supports, Some(0.95))]),
            None,
            weights,
        );
        assert_eq!((supported.verdict, supported.cited), (Verdict::Supported, vec![1]));
        // Not about the claim: no verdict, however low its score (VitaminC's passages are
        // all about their claims, so only the topic gate says this).
        let none = decide(claim, &scored(&[(unrelated, Some(0.05))]), None, weights);
        assert_eq!(none.verdict, Verdict::Insufficient, "{none:?}");
        let against = decide(claim, &scored(&[(contradicts, Some(0.05))]), None, weights);
        assert_eq!(against.verdict, Verdict::Contradicted, "{against:?}");
        assert_eq!(against.cited, [0]);
    }

    #[test]
    fn the_placeholder_model_tells_the_three_verdicts_apart() {
        let weights = &placeholder();
        let claim = "The river ferry ran until 1966.";
        let supports = "The river ferry ran until 1966, when the bridge opened.";
        let contradicts = "The river ferry ran until 1972, when the bridge opened.";
        let unrelated = "The town hall was rebuilt in brick after the fire.";

        let supported = decide(
            claim,
            &scored(&[(unrelated, Some(0.05)), (supports, Some(0.97))]),
            None,
            weights,
        );
        assert_eq!(supported.verdict, Verdict::Supported);
        assert_eq!(supported.cited, [1]);
        assert!(supported.confidence > 0.8, "{supported:?}");

        let contradicted = decide(
            claim,
            &scored(&[(contradicts, Some(0.08)), (unrelated, Some(0.1))]),
            None,
            weights,
        );
        assert_eq!(contradicted.verdict, Verdict::Contradicted, "{contradicted:?}");
        assert_eq!(contradicted.cited, [0], "the passage about the claim, not the best-scored");
        assert_eq!(contradicted.features.missing_numbers, 1.0);

        let insufficient = decide(claim, &scored(&[(unrelated, Some(0.1))]), None, weights);
        assert_eq!(insufficient.verdict, Verdict::Insufficient, "{insufficient:?}");
        assert!(insufficient.cited.is_empty());

        let nothing = decide(claim, &[], None, weights);
        assert_eq!(nothing.verdict, Verdict::Insufficient);
        let unknown =
            decide(claim, &scored(&[(supports, None), (unrelated, Some(f64::NAN))]), None, weights);
        assert!(unknown.confidence.is_finite());
        assert_eq!(unknown.best, None);
    }

    #[test]
    fn the_prior_calibrates_both_scores_and_an_unusable_one_is_none() {
        let weights = VerifierWeights::builtin();
        let claim = "The bridge opened in 1932.";
        let passages = scored(&[("The bridge opened in 1932.", Some(0.8))]);
        let (plain, ..) = features(claim, &passages, None, weights);
        let (calibrated, ..) = features(claim, &passages, Some(0.9), weights);
        let logit_prior = (0.9f64 / 0.1).ln();
        assert!((plain.calibrated_max_s - calibrated.calibrated_max_s - logit_prior).abs() < 1e-9);
        assert!(
            (plain.calibrated_topic_s - calibrated.calibrated_topic_s - logit_prior).abs() < 1e-9
        );
        assert!((plain.calibrated_max_s - (0.8f64 / 0.2).ln()).abs() < 1e-9, "no prior: 0.5");
        for unusable in [f64::NAN, f64::INFINITY, f64::NEG_INFINITY] {
            assert_eq!(features(claim, &passages, Some(unusable), weights).0, plain);
        }
        // A prior of exactly 0 or 1 is clamped like any score: finite features.
        for edge in [0.0, 1.0] {
            let (f, ..) = features(claim, &passages, Some(edge), weights);
            assert!(f.calibrated_max_s.is_finite() && f.calibrated_topic_s.is_finite());
        }
        // No passage judged: nothing to calibrate.
        let (none, ..) = features(claim, &scored(&[(claim, None)]), Some(0.9), weights);
        assert_eq!(none.calibrated_max_s, 0.0);
    }

    #[test]
    fn an_answers_sentence_is_supported_from_the_answers_threshold() {
        let (claim, passage) = (FERRY, FERRY_PASSAGE);
        let mut weights = placeholder();
        // A score where `supported` is not the most probable class.
        let passages = scored(&[(passage, Some(0.4))]);
        let as_claim = decide(claim, &passages, None, &weights);
        let p = as_claim.probabilities;
        assert!(p.supported < p.contradicted.max(p.insufficient), "{as_claim:?}");
        assert_ne!(as_claim.verdict, Verdict::Supported);
        // No answer threshold: a sentence is decided as a claim is.
        let sentence = decide_by(claim, &passages, None, &weights, Rule::AnswerSentence);
        assert_eq!(sentence.verdict, as_claim.verdict);
        // At the threshold: supported, with its probability as the confidence and the
        // passage cited.
        weights.thresholds.answer_supported = Some(p.supported);
        let sentence = decide_by(claim, &passages, None, &weights, Rule::AnswerSentence);
        assert_eq!(sentence.verdict, Verdict::Supported, "{sentence:?}");
        assert_eq!(sentence.cited, [0]);
        assert!((sentence.confidence - p.supported).abs() < 1e-12);
        // The claim's rule is unchanged by it, and a sentence just under it is not supported.
        assert_eq!(decide(claim, &passages, None, &weights).verdict, as_claim.verdict);
        weights.thresholds.answer_supported = Some(p.supported + 1e-9);
        let under = decide_by(claim, &passages, None, &weights, Rule::AnswerSentence);
        assert_ne!(under.verdict, Verdict::Supported);
        // Nothing judged: never supported, whatever the threshold.
        weights.thresholds.answer_supported = Some(0.0);
        let nothing =
            decide_by(claim, &scored(&[(passage, None)]), None, &weights, Rule::AnswerSentence);
        assert_eq!(nothing.verdict, Verdict::Insufficient);
    }

    #[test]
    fn a_sentence_judged_on_chunks_takes_the_chunks_threshold_or_else_the_answers() {
        let (claim, passage) = (FERRY, FERRY_PASSAGE);
        let mut weights = placeholder();
        let passages = scored(&[(passage, Some(0.4))]);
        let p = decide(claim, &passages, None, &weights).probabilities;
        let in_chunk = |weights: &VerifierWeights| {
            decide_by(claim, &passages, None, weights, Rule::AnswerSentenceInChunk).verdict
        };
        // Without a threshold of its own, the answer's holds on chunks too.
        weights.thresholds.answer_supported = Some(p.supported);
        assert_eq!(in_chunk(&weights), Verdict::Supported);
        weights.thresholds.answer_supported = Some(p.supported + 1e-9);
        assert_ne!(in_chunk(&weights), Verdict::Supported);
        // With one, it decides on chunks, and only there.
        weights.thresholds.answer_supported_in_chunk = Some(p.supported);
        assert_eq!(in_chunk(&weights), Verdict::Supported);
        let whole = decide_by(claim, &passages, None, &weights, Rule::AnswerSentence);
        assert_ne!(whole.verdict, Verdict::Supported);
        weights.thresholds.answer_supported_in_chunk = Some(p.supported + 1e-9);
        assert_ne!(in_chunk(&weights), Verdict::Supported);
        // A claim's rule reads neither.
        weights.thresholds.answer_supported_in_chunk = Some(0.0);
        assert_eq!(
            decide(claim, &passages, None, &weights).verdict,
            decide(claim, &passages, None, &placeholder()).verdict
        );
    }

    #[test]
    fn an_answers_sentence_is_decided_on_the_answer_models_p_holds_when_the_weights_have_one() {
        let (claim, passage) = (FERRY, FERRY_PASSAGE);
        let mut weights = placeholder();
        let passages = scored(&[(passage, Some(0.4))]);
        let as_claim = decide(claim, &passages, None, &weights);
        let p = as_claim.probabilities;
        // P(supported) under the answer's threshold: without an answer model, not supported.
        weights.thresholds.answer_supported = Some(p.supported + 0.01);
        let without = decide_by(claim, &passages, None, &weights, Rule::AnswerSentence);
        assert_ne!(without.verdict, Verdict::Supported);
        assert_eq!(without.holds, None);
        // An answer model on calibratedMaxS alone: P(holds) = sigmoid(1 + 2 x).
        let x = as_claim.features.calibrated_max_s;
        weights.answer = Some(Linear { bias: 1.0, weights: vec![2.0, 0.0, 0.0, 0.0, 0.0] });
        let holds = 1.0 / (1.0 + (-(1.0 + 2.0 * x)).exp());
        assert!(holds > p.supported + 0.01, "{holds} {p:?}");
        let sentence = decide_by(claim, &passages, None, &weights, Rule::AnswerSentence);
        assert_eq!(sentence.verdict, Verdict::Supported, "{sentence:?}");
        assert!(sentence.holds.is_some_and(|h| (h - holds).abs() < 1e-12), "{sentence:?}");
        // Its confidence is P(holds), and the passage is cited.
        assert!((sentence.confidence - holds).abs() < 1e-12);
        assert_eq!(sentence.cited, [0]);
        // On chunks too (the chunks' threshold read on it), and just over it, not supported.
        weights.thresholds.answer_supported_in_chunk = Some(holds);
        let in_chunk = decide_by(claim, &passages, None, &weights, Rule::AnswerSentenceInChunk);
        assert_eq!(in_chunk.verdict, Verdict::Supported);
        weights.thresholds.answer_supported_in_chunk = Some(holds + 1e-9);
        let over = decide_by(claim, &passages, None, &weights, Rule::AnswerSentenceInChunk);
        assert_ne!(over.verdict, Verdict::Supported);
        // A claim's rule reads neither the model nor reports P(holds).
        let claim_rule = decide(claim, &passages, None, &weights);
        assert_eq!(claim_rule.verdict, as_claim.verdict);
        assert_eq!(claim_rule.holds, None);
        // Nothing judged: never supported, whatever the model says.
        weights.thresholds.answer_supported = Some(0.0);
        let nothing =
            decide_by(claim, &scored(&[(passage, None)]), None, &weights, Rule::AnswerSentence);
        assert_eq!(nothing.verdict, Verdict::Insufficient);
    }

    #[test]
    fn an_answer_model_with_the_wrong_weights_is_refused() {
        let mut weights = VerifierWeights::builtin().clone();
        for bad in [
            Linear { bias: 0.0, weights: vec![1.0; 4] },
            Linear { bias: 0.0, weights: vec![1.0; FEATURES.len() - 1] },
            Linear { bias: f64::NAN, weights: vec![1.0; FEATURES.len()] },
        ] {
            weights.answer = Some(bad.clone());
            // NaN is written as null, which is refused as well.
            let text = serde_json::to_string(&weights).unwrap_or_default();
            assert!(VerifierWeights::from_json(&text).is_err(), "{bad:?} was taken");
        }
        weights.answer = Some(Linear { bias: 0.5, weights: vec![1.0; FEATURES.len()] });
        let text = serde_json::to_string(&weights).unwrap_or_default();
        assert_eq!(VerifierWeights::from_json(&text), Ok(weights));
    }

    #[test]
    fn a_file_fitted_before_compared_numbers_is_read_with_its_five_and_decides_as_it_did() {
        let old = placeholder();
        assert_eq!(old.features, FEATURES[..5]);
        // Its weights stop at the fifth feature: a bound the passage breaks moves nothing.
        let claim = "The ferry carried more than 1,500 passengers.";
        let passages =
            [ScoredPassage { text: "The ferry carried 1,159 passengers.", score: Some(0.7) }];
        let decision = decide(claim, &passages, Some(0.5), &old);
        assert_eq!(decision.features.compared_numbers, -1.0);
        let mut unaware = decision.features;
        unaware.compared_numbers = 0.0;
        let x = unaware.to_array();
        let z = |l: &Linear| l.score(&x);
        let by_five =
            [&old.classes.supported, &old.classes.contradicted, &old.classes.insufficient].map(z);
        let total: f64 = by_five.iter().map(|v| v.exp()).sum();
        assert!((decision.probabilities.supported - by_five[0].exp() / total).abs() < 1e-12);
        // Five names with six weights, six names with five, or the names in another order:
        // refused.
        let mut json = serde_json::to_value(&old).unwrap();
        json["classes"]["supported"]["weights"] = json!(vec![0.0; 6]);
        assert!(VerifierWeights::from_json(&json.to_string()).is_err());
        let mut json = serde_json::to_value(&old).unwrap();
        json["features"] = json!(FEATURES);
        assert!(VerifierWeights::from_json(&json.to_string()).is_err());
        let mut swapped = FEATURES;
        swapped.swap(4, 5);
        json["features"] = json!(swapped);
        for class in ["supported", "contradicted", "insufficient"] {
            json["classes"][class]["weights"] = json!(vec![0.0; 6]);
        }
        assert!(VerifierWeights::from_json(&json.to_string()).is_err());
        json["features"] = json!(FEATURES);
        assert!(VerifierWeights::from_json(&json.to_string()).is_ok());
    }

    #[test]
    fn an_answer_threshold_outside_zero_to_one_is_refused() {
        let mut weights = VerifierWeights::builtin().clone();
        for bad in [-0.1, 1.5] {
            weights.thresholds.answer_supported = Some(bad);
            let text = serde_json::to_string(&weights).unwrap_or_default();
            assert!(VerifierWeights::from_json(&text).is_err(), "{bad} was taken");
        }
        let mut weights = VerifierWeights::builtin().clone();
        for bad in [-0.1, 1.5] {
            weights.thresholds.answer_supported_in_chunk = Some(bad);
            let text = serde_json::to_string(&weights).unwrap_or_default();
            assert!(VerifierWeights::from_json(&text).is_err(), "{bad} was taken in a chunk");
        }
    }

    #[test]
    fn supported_cites_each_supporting_passage_once() {
        let weights = VerifierWeights::builtin();
        let claim = "The bridge opened in 1932.";
        let passage = "The bridge opened in 1932.";
        let other = "In 1932 the bridge opened to traffic.";
        let decision = decide(
            claim,
            &scored(&[(passage, Some(0.9)), (passage, Some(0.95)), (other, Some(0.8))]),
            None,
            weights,
        );
        assert_eq!(decision.verdict, Verdict::Supported);
        assert_eq!(decision.cited, [0, 2], "a duplicate text is cited once");
    }
}
