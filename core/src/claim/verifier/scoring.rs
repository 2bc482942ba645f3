//! The scoring model: the features of a claim and its scored passages, the weights file
//! that reads them, and the verdict ([`super`] step 4; the model and the file's format are
//! described there).

use std::collections::HashSet;

use serde::{Deserialize, Serialize};

use super::BuiltinWeights;
use super::compare::{Comparison, compare_numbers, digit_run};
use crate::claim::verdict::Verdict;
use crate::retrieve::bm25_terms;

/// The features' names, in the weights file's order.
pub const FEATURES: [&str; 6] = [
    "calibratedMaxS",
    "calibratedTopicS",
    "overlap",
    "missingNumbers",
    "hasNumber",
    "comparedNumbers",
];

/// How many of [`FEATURES`] a weights file fitted before `comparedNumbers` names: its first
/// five, which it is read with (the sixth's weights are then 0).
const FEATURES_BEFORE_COMPARED: usize = 5;

/// A linear score of one class.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Linear {
    /// The intercept.
    pub bias: f64,
    /// One weight per feature the file names, in [`FEATURES`] order (a feature it does not
    /// name weighs 0).
    pub weights: Vec<f64>,
}

impl Linear {
    /// `bias + weights · x`, `x` in [`FEATURES`] order.
    #[must_use]
    pub fn score(&self, x: &[f64; FEATURES.len()]) -> f64 {
        self.bias + self.weights.iter().zip(x).map(|(w, v)| w * v).sum::<f64>()
    }

    /// The logistic of [`Linear::score`]: the probability of a two-class model whose
    /// reference class scores 0 (as the answer model, [`VerifierWeights::answer`]).
    #[must_use]
    pub fn probability(&self, x: &[f64; FEATURES.len()]) -> f64 {
        let z = self.score(x);
        if z >= 0.0 { 1.0 / (1.0 + (-z).exp()) } else { z.exp() / (1.0 + z.exp()) }
    }
}

/// The three classes' linear scores.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Classes {
    /// `supported`.
    pub supported: Linear,
    /// `contradicted`.
    pub contradicted: Linear,
    /// `insufficient` (zeros for a regression fitted with it as the reference class).
    pub insufficient: Linear,
}

/// The decision thresholds.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Thresholds {
    /// `P(supported)` needed for `supported`.
    pub supported: f64,
    /// `P(contradicted)` needed for `contradicted`.
    pub contradicted: f64,
    /// The `S` from which a passage is cited for `supported`.
    pub cite_support: f64,
    /// The share of the claim's content words the topic passage must hold for `contradicted`:
    /// a passage that is not about the claim cannot contradict it (0, the default, asks
    /// nothing).
    #[serde(default)]
    pub topic_overlap: f64,
    /// The support a sentence of an answer needs for `supported` ([`Rule::AnswerSentence`]),
    /// whether or not another class is more probable: `P(holds)` with an answer model
    /// ([`VerifierWeights::answer`]), else `P(supported)`. An answer is faithful only when every
    /// sentence holds, so a claim's most-probable-class rule compounds its misses over the
    /// sentences; this threshold is fitted on answers composed from dev claims (`cargo xtask
    /// fit`). Absent: a sentence is decided as a claim is.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub answer_supported: Option<f64>,
    /// The support (as for [`Thresholds::answer_supported`]) a sentence of an answer needs
    /// when it was judged on chunks of a longer passage (a document:
    /// [`Rule::AnswerSentenceInChunk`]). A model's `S` for a sentence read among others is
    /// lower than for the sentence alone, so the threshold fitted on passages of a sentence
    /// or two misses supported sentences of a document; this one is
    /// fitted with the same weights on dev claims set inside documents (`cargo xtask fit
    /// --chunked-answers`). Absent: [`Thresholds::answer_supported`] holds there too.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub answer_supported_in_chunk: Option<f64>,
}

/// The scoring model's data: the weights file (see [the route's docs](super) for its format).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct VerifierWeights {
    /// The file format's version: 1.
    pub format: u32,
    /// Whether these weights were fitted (the repository's first ones were not).
    pub fitted: bool,
    /// What they were fitted on, when and how well (free text).
    #[serde(default)]
    pub note: String,
    /// The features' names: exactly [`FEATURES`], or their first five (a file fitted before
    /// `comparedNumbers`).
    pub features: Vec<String>,
    /// The classes' linear scores.
    pub classes: Classes,
    /// The decision thresholds.
    pub thresholds: Thresholds,
    /// The model of an answer's sentence: the log-odds that it holds rather than is
    /// contradicted, `bias + weights · x`, fitted on the supported and contradicted dev claims
    /// alone (an answer is hallucinated by a wrong sentence, not by one the corpus is silent
    /// about). With it, `answerSupported` and `answerSupportedInChunk` are thresholds on its
    /// probability, `P(holds)`; without it (files fitted before), on `P(supported)`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub answer: Option<Linear>,
    /// `S` is clamped to `[scoreClamp, 1 - scoreClamp]` before its logit.
    pub score_clamp: f64,
}

impl VerifierWeights {
    /// Reads and checks a weights file.
    ///
    /// # Errors
    /// Why the text is not a usable weights file.
    pub fn from_json(text: &str) -> Result<Self, String> {
        let weights: Self = serde_json::from_str(text).map_err(|e| e.to_string())?;
        weights.check()?;
        Ok(weights)
    }

    /// `P(holds)` of a sentence with these features: the answer model's probability that it
    /// holds rather than is contradicted ([`VerifierWeights::answer`]); `None` without one.
    #[must_use]
    pub fn holds(&self, features: &Features) -> Option<f64> {
        Some(self.answer.as_ref()?.probability(&features.to_array()))
    }

    /// The default weights compiled in ([`BuiltinWeights::default`]).
    #[must_use]
    pub fn builtin() -> &'static Self {
        BuiltinWeights::default().weights()
    }

    fn check(&self) -> Result<(), String> {
        if self.format != 1 {
            return Err(format!("format {} is not 1", self.format));
        }
        if self.features != FEATURES && self.features != FEATURES[..FEATURES_BEFORE_COMPARED] {
            return Err(format!("features must be {FEATURES:?}, not {:?}", self.features));
        }
        for (name, class) in [
            ("supported", &self.classes.supported),
            ("contradicted", &self.classes.contradicted),
            ("insufficient", &self.classes.insufficient),
        ]
        .into_iter()
        .chain(self.answer.as_ref().map(|answer| ("answer", answer)))
        {
            if class.weights.len() != self.features.len() {
                return Err(format!(
                    "{name} has {} weights, not {} (one per feature)",
                    class.weights.len(),
                    self.features.len()
                ));
            }
            if !class.bias.is_finite() || class.weights.iter().any(|w| !w.is_finite()) {
                return Err(format!("{name} has a weight that is not a finite number"));
            }
        }
        let t = self.thresholds;
        let all = [
            t.supported,
            t.contradicted,
            t.cite_support,
            t.topic_overlap,
            t.answer_supported.unwrap_or(0.0),
            t.answer_supported_in_chunk.unwrap_or(0.0),
        ];
        if all.iter().any(|v| !(0.0..=1.0).contains(v)) {
            return Err("thresholds must be between 0 and 1".to_owned());
        }
        if !(self.score_clamp > 0.0 && self.score_clamp < 0.5) {
            return Err("scoreClamp must be between 0 and 0.5".to_owned());
        }
        Ok(())
    }
}

/// A passage and its score, as [`decide`] takes them.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ScoredPassage<'a> {
    /// The passage's text.
    pub text: &'a str,
    /// Its `S` (the highest over its asked chunks); `None` when unknown.
    pub score: Option<f64>,
}

/// The features of a claim and its scored passages (see [the route's docs](super)).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Features {
    /// `logit(S) - logit(S0)` of the best-scored passage.
    pub calibrated_max_s: f64,
    /// `logit(S) - logit(S0)` of the topic passage.
    pub calibrated_topic_s: f64,
    /// The share of the claim's content words in the topic passage.
    pub overlap: f64,
    /// The share of the claim's numbers missing from the topic passage.
    pub missing_numbers: f64,
    /// 1 when the claim has a number.
    pub has_number: f64,
    /// The claim's bounds on numbers against the topic passage's numbers
    /// ([`compared_numbers`](super::compared_numbers)): 1 they hold, -1 one fails, 0 nothing
    /// to compare (and in reports written before this feature).
    #[serde(default)]
    pub compared_numbers: f64,
}

impl Features {
    /// The values in [`FEATURES`] order.
    #[must_use]
    pub fn to_array(&self) -> [f64; FEATURES.len()] {
        [
            self.calibrated_max_s,
            self.calibrated_topic_s,
            self.overlap,
            self.missing_numbers,
            self.has_number,
            self.compared_numbers,
        ]
    }
}

/// The class probabilities.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ClassProbabilities {
    /// `P(supported)`.
    pub supported: f64,
    /// `P(contradicted)`.
    pub contradicted: f64,
    /// `P(insufficient)`.
    pub insufficient: f64,
}

/// What [`decide`] concludes.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Decision {
    /// The verdict.
    pub verdict: Verdict,
    /// How sure, from 0 to 1.
    pub confidence: f64,
    /// The class probabilities.
    pub probabilities: ClassProbabilities,
    /// `P(holds)`, the weights' answer model's probability that the sentence holds rather
    /// than is contradicted ([`VerifierWeights::answer`]): present when an answer's rule
    /// decided by it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub holds: Option<f64>,
    /// The features.
    pub features: Features,
    /// The passages that decided (indices into the passages given), each once, in order;
    /// empty for `insufficient`.
    pub cited: Vec<usize>,
    /// The best-scored passage.
    pub best: Option<usize>,
    /// The topic passage.
    pub topic: Option<usize>,
    /// The claim's bound on a number checked against the topic passage, when it decided
    /// `comparedNumbers` (the numbers a rationale names). Not serialised: the feature is.
    #[serde(skip)]
    pub comparison: Option<Comparison>,
}

/// The numbers in `text`: digit runs, with `,` and `.` inside them kept as one number
/// (`1,117` is `1117`, `3.5` stays), thousands separators dropped.
pub(super) fn numbers(text: &str) -> HashSet<String> {
    let bytes = text.as_bytes();
    let mut out = HashSet::new();
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i].is_ascii_digit() {
            let end = digit_run(bytes, i);
            out.insert(text[i..end].replace(',', ""));
            i = end;
        } else {
            i += 1;
        }
    }
    out
}

fn logit(score: f64, clamp: f64) -> f64 {
    let s = score.clamp(clamp, 1.0 - clamp);
    (s / (1.0 - s)).ln()
}

/// A score that can be used: finite and within `[0, 1]`.
pub(super) fn usable(score: Option<f64>) -> Option<f64> {
    score.filter(|s| s.is_finite()).map(|s| s.clamp(0.0, 1.0))
}

/// The lexical part of the features of one passage: (overlap, missing numbers).
fn lexical(
    claim_terms: &HashSet<String>,
    claim_numbers: &HashSet<String>,
    text: &str,
) -> (f64, f64) {
    #[allow(clippy::cast_precision_loss)]
    let share =
        |part: usize, whole: usize| if whole == 0 { 0.0 } else { part as f64 / whole as f64 };
    let terms: HashSet<String> = bm25_terms(text).into_iter().collect();
    let numbers = numbers(text);
    let found = claim_terms.iter().filter(|t| terms.contains(*t)).count();
    let missing = claim_numbers.iter().filter(|n| !numbers.contains(*n)).count();
    (share(found, claim_terms.len()), share(missing, claim_numbers.len()))
}

/// The features of `claim` and its scored passages, with the best-scored and the topic
/// passage (indices into `passages`). `prior` is `S0`, the answer about the claim with an
/// empty document (`None`: not asked or unknown, read as 0.5).
#[must_use]
pub fn features(
    claim: &str,
    passages: &[ScoredPassage<'_>],
    prior: Option<f64>,
    weights: &VerifierWeights,
) -> (Features, Option<usize>, Option<usize>) {
    let (features, best, topic, _) = features_and_comparison(claim, passages, prior, weights);
    (features, best, topic)
}

/// [`features`], with the comparison that decided `comparedNumbers`.
fn features_and_comparison(
    claim: &str,
    passages: &[ScoredPassage<'_>],
    prior: Option<f64>,
    weights: &VerifierWeights,
) -> (Features, Option<usize>, Option<usize>, Option<Comparison>) {
    let clamp = weights.score_clamp;
    let logit_prior = usable(prior).map_or(0.0, |s0| logit(s0, clamp));
    let claim_terms: HashSet<String> = bm25_terms(claim).into_iter().collect();
    let claim_numbers = numbers(claim);
    let best = passages
        .iter()
        .enumerate()
        .filter_map(|(i, p)| usable(p.score).map(|s| (i, s)))
        .fold(None, |best: Option<(usize, f64)>, (i, s)| match best {
            Some((_, b)) if b >= s => best,
            _ => Some((i, s)),
        });
    let lexicals: Vec<(f64, f64)> =
        passages.iter().map(|p| lexical(&claim_terms, &claim_numbers, p.text)).collect();
    // The topic passage is chosen among the passages whose score is known, if any: the
    // lexical features describe a passage the model has judged.
    let known: Vec<usize> =
        (0..passages.len()).filter(|&i| usable(passages[i].score).is_some()).collect();
    let candidates = if known.is_empty() { (0..passages.len()).collect() } else { known };
    let topic = candidates.into_iter().fold(None, |topic: Option<usize>, i| match topic {
        Some(t) => {
            let (a, b) = (lexicals[i].0, lexicals[t].0);
            let higher = usable(passages[i].score).unwrap_or(-1.0)
                > usable(passages[t].score).unwrap_or(-1.0);
            if a > b || (a == b && higher) { Some(i) } else { topic }
        }
        None => Some(i),
    });
    let (overlap, missing_numbers) = topic.map_or((0.0, 0.0), |t| lexicals[t]);
    let comparison = topic.and_then(|t| compare_numbers(claim, passages[t].text));
    let features = Features {
        calibrated_max_s: best.map_or(0.0, |(_, s)| logit(s, clamp) - logit_prior),
        calibrated_topic_s: topic
            .and_then(|t| usable(passages[t].score))
            .map_or(0.0, |s| logit(s, clamp) - logit_prior),
        overlap,
        missing_numbers: if claim_numbers.is_empty() { 0.0 } else { missing_numbers },
        has_number: if claim_numbers.is_empty() { 0.0 } else { 1.0 },
        compared_numbers: comparison.as_ref().map_or(0.0, Comparison::feature),
    };
    (features, best.map(|(i, _)| i), topic, comparison)
}

/// Which rule turns the class probabilities into a verdict.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub enum Rule {
    /// A claim checked on its own: the most probable class (with its thresholds and the topic
    /// gate for `contradicted`).
    #[default]
    Claim,
    /// A sentence (or one of its claims) of an answer: `supported` from the weights'
    /// `answerSupported` threshold when they have one ([`Thresholds::answer_supported`]), on
    /// `P(holds)` when they have an answer model ([`VerifierWeights::answer`]) and on
    /// `P(supported)` otherwise; without the threshold, as a claim.
    AnswerSentence,
    /// A sentence of an answer judged on chunks of a longer passage (a document):
    /// `supported` from `answerSupportedInChunk` when the weights have one
    /// ([`Thresholds::answer_supported_in_chunk`]), otherwise as [`Rule::AnswerSentence`].
    AnswerSentenceInChunk,
}

/// The verdict, confidence and citations for `claim` from its scored passages and the prior
/// `S0` (see [`features`] and [the route's docs](super)), by the claim's rule: the one scoring
/// function the route, the tests and a fitting command use ([`decide_by`] for an answer's
/// sentences).
#[must_use]
pub fn decide(
    claim: &str,
    passages: &[ScoredPassage<'_>],
    prior: Option<f64>,
    weights: &VerifierWeights,
) -> Decision {
    decide_by(claim, passages, prior, weights, Rule::Claim)
}

/// [`decide`] by `rule`.
#[must_use]
pub fn decide_by(
    claim: &str,
    passages: &[ScoredPassage<'_>],
    prior: Option<f64>,
    weights: &VerifierWeights,
    rule: Rule,
) -> Decision {
    let (features, best, topic, comparison) =
        features_and_comparison(claim, passages, prior, weights);
    let x = features.to_array();
    let classes = &weights.classes;
    let scores = [
        classes.supported.score(&x),
        classes.contradicted.score(&x),
        classes.insufficient.score(&x),
    ];
    let max = scores.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    let exp: Vec<f64> = scores.iter().map(|s| (s - max).exp()).collect();
    let total: f64 = exp.iter().sum();
    let probabilities = ClassProbabilities {
        supported: exp[0] / total,
        contradicted: exp[1] / total,
        insufficient: exp[2] / total,
    };
    let t = weights.thresholds;
    let (p_sup, p_con) = (probabilities.supported, probabilities.contradicted);
    let p_ins = probabilities.insufficient;
    let answer_threshold = match rule {
        Rule::Claim => None,
        Rule::AnswerSentence => t.answer_supported,
        Rule::AnswerSentenceInChunk => t.answer_supported_in_chunk.or(t.answer_supported),
    };
    // The answer model's P(holds), when an answer's threshold is read on it.
    let holds = answer_threshold.and_then(|_| weights.holds(&features));
    let supported = match (answer_threshold, holds) {
        (Some(at), Some(p)) => p >= at,
        (Some(at), None) => p_sup >= at,
        (None, _) => p_sup >= p_con && p_sup >= p_ins && p_sup >= t.supported,
    };
    let (verdict, confidence) = if supported {
        (Verdict::Supported, holds.unwrap_or(p_sup))
    } else if p_con > p_sup
        && p_con >= p_ins
        && p_con >= t.contradicted
        && features.overlap >= t.topic_overlap
    {
        (Verdict::Contradicted, p_con)
    } else {
        (Verdict::Insufficient, 1.0 - p_sup.max(p_con))
    };
    let mut cited: Vec<usize> = match verdict {
        Verdict::Supported => passages
            .iter()
            .enumerate()
            .filter(|(i, p)| {
                Some(*i) == best || usable(p.score).is_some_and(|s| s >= t.cite_support)
            })
            .map(|(i, _)| i)
            .collect(),
        Verdict::Contradicted => topic.into_iter().collect(),
        Verdict::Insufficient => Vec::new(),
    };
    // Each passage once, by its text too: two items with one text are one citation.
    let mut seen = HashSet::new();
    cited.retain(|&i| seen.insert(passages[i].text));
    // A conclusive verdict no judged passage stands behind (no score is known, or there are
    // no passages) is not one: no passage supports or contradicts the claim.
    let (verdict, confidence) = if verdict.is_conclusive() && (cited.is_empty() || best.is_none()) {
        cited.clear();
        (Verdict::Insufficient, 1.0 - p_sup.max(p_con))
    } else {
        (verdict, confidence)
    };
    let confidence = if confidence.is_finite() { confidence.clamp(0.0, 1.0) } else { 0.0 };
    Decision { verdict, confidence, probabilities, holds, features, cited, best, topic, comparison }
}
