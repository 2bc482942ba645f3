//! What one answer says: `S` from the first token's probabilities, else the sampled token
//! ([`super`] step 3).

use serde::{Deserialize, Serialize};

use crate::message::{AssistantMessage, FirstToken, TokenLogprob};

/// Where a question's score came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
#[non_exhaustive]
pub enum ScoreSource {
    /// The first token's probabilities: `S = P(Yes) / (P(Yes) + P(No))`.
    Probabilities,
    /// The sampled token (the provider reported no usable probabilities): Yes is 1, No is 0.
    SampledToken,
    /// Neither: the score is unknown.
    Unknown,
}

/// Why a response's probabilities were not used.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
#[non_exhaustive]
pub enum ProbabilityIssue {
    /// The response carries no probabilities (Anthropic, or a server that ignored `logprobs`).
    Missing,
    /// Yes or No was listed only with a log probability that is not a finite number.
    NotFinite,
    /// Neither Yes nor No is among the listed tokens.
    NoYesNo,
}

/// What one answer says: the score, where it came from, and why the probabilities were not
/// used if they were not.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Reading {
    /// `S` in `[0, 1]`; `None` when unknown.
    pub score: Option<f64>,
    /// Where it came from.
    pub source: ScoreSource,
    /// Why the probabilities were not used.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub issue: Option<ProbabilityIssue>,
}

/// Which answer a token is: `Some(true)` for a variant of Yes, `Some(false)` for No (case,
/// surrounding spaces and tokenizer space marks ignored).
fn yes_or_no(token: &str) -> Option<bool> {
    let word = token.trim_matches(|c: char| c.is_whitespace() || c == '\u{2581}' || c == '\u{120}');
    if word.eq_ignore_ascii_case("yes") {
        Some(true)
    } else if word.eq_ignore_ascii_case("no") {
        Some(false)
    } else {
        None
    }
}

/// `ln(Σ exp(x))` of finite values; `None` for none.
fn log_sum_exp(values: &[f64]) -> Option<f64> {
    let max = values.iter().copied().reduce(f64::max)?;
    Some(max + values.iter().map(|v| (v - max).exp()).sum::<f64>().ln())
}

/// `S = P(Yes) / (P(Yes) + P(No))` from a first token's probabilities, each word's variants
/// summed (the sampled token counts when it is not listed). A word not listed counts as
/// probability 0, so `S` is 1 or 0 when only one is.
///
/// # Errors
/// [`ProbabilityIssue::NotFinite`] when a Yes or No token is listed only with a log
/// probability that is not a finite number, [`ProbabilityIssue::NoYesNo`] when neither word is
/// listed.
pub fn yes_no_score(first: &FirstToken) -> Result<f64, ProbabilityIssue> {
    let listed = |entry: &TokenLogprob| first.top.iter().any(|t| t.token == entry.token);
    let sampled = (!listed(&first.sampled)).then_some(&first.sampled);
    let (mut yes, mut no, mut unusable) = (Vec::new(), Vec::new(), false);
    for entry in first.top.iter().chain(sampled) {
        let Some(word) = yes_or_no(&entry.token) else { continue };
        match entry.logprob.filter(|l| l.is_finite()) {
            Some(logprob) if word => yes.push(logprob.min(0.0)),
            Some(logprob) => no.push(logprob.min(0.0)),
            None => unusable = true,
        }
    }
    match (log_sum_exp(&yes), log_sum_exp(&no)) {
        (None, None) if unusable => Err(ProbabilityIssue::NotFinite),
        (None, None) => Err(ProbabilityIssue::NoYesNo),
        (Some(_), None) => Ok(1.0),
        (None, Some(_)) => Ok(0.0),
        // Both are at most 0, so the difference is finite; the logistic of it is S.
        (Some(yes), Some(no)) => Ok(1.0 / (1.0 + (no - yes).exp())),
    }
}

/// What an answer to a verifier question says (see [`Reading`]): the probabilities when usable,
/// else the sampled token (its text, for a provider without probabilities), else unknown.
#[must_use]
pub fn read_answer(response: &AssistantMessage) -> Reading {
    let issue = match &response.first_token {
        None => ProbabilityIssue::Missing,
        Some(first) => match yes_no_score(first) {
            Ok(score) => {
                return Reading {
                    score: Some(score),
                    source: ScoreSource::Probabilities,
                    issue: None,
                };
            }
            Err(issue) => issue,
        },
    };
    let text = response.text_content();
    let sampled = response.first_token.as_ref().map_or(text.as_str(), |f| f.sampled.token.as_str());
    let first_word = sampled
        .trim_start_matches(|c: char| !c.is_alphanumeric())
        .split(|c: char| !c.is_alphanumeric())
        .next()
        .unwrap_or_default();
    match yes_or_no(first_word) {
        Some(yes) => Reading {
            score: Some(if yes { 1.0 } else { 0.0 }),
            source: ScoreSource::SampledToken,
            issue: Some(issue),
        },
        None => Reading { score: None, source: ScoreSource::Unknown, issue: Some(issue) },
    }
}
