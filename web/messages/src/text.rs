//! The words a page shows for the engine's values (a verdict, what a failure spent, what to do
//! about it), shared by the app's cards and the Markdown export ([`crate::markdown`]), which
//! the worker writes.

use crate::{Provenance, SpentView, UsageView};

/// A verdict in words.
pub fn verdict_text(verdict: &str) -> String {
    match verdict {
        "supported" => "Supported".to_owned(),
        "contradicted" => "Contradicted".to_owned(),
        "insufficient" => "Insufficient evidence".to_owned(),
        other => other.to_owned(),
    }
}

/// The verdict a failure of this kind amounts to, if any: research that found nothing new
/// (`no-new-evidence`, or `research-turn-limit` when it hit its turn bound) leaves the claim
/// unsettled by the corpus, which is the verdict `insufficient` (the core ends the check
/// there, without a report).
pub fn failure_verdict(kind: &str) -> Option<&'static str> {
    // The core's `JobFailureKind::is_insufficient`, by name (this crate does not depend on the
    // core); the worker's tests check the two agree on every kind.
    matches!(kind, "no-new-evidence" | "research-turn-limit").then_some("insufficient")
}

/// What the page is told when the browser's storage for it is full and `what` (a check's
/// result, its progress, the corpus) could not be written: kept in memory until the engine
/// stops, and what to do about it.
pub fn not_saved(what: &str, then: &str) -> String {
    format!(
        "{what} not saved: this browser's storage for the page is full. {then} Export the \
         results you want to keep (JSON, Markdown or CSV), and free space: clear old results or the \
         corpus here, or other sites' data in the browser's settings."
    )
}

/// What a check's card says of its result when a newer version of the app has taken the
/// storage over (this tab's engine closed its database for the upgrade).
#[must_use]
pub fn not_saved_for_newer_version(claim: &str) -> String {
    format!(
        "The result of “{claim}” is not saved: a newer version of this app opened its storage in \
         another tab. It is shown until this tab closes. Export the results you want to keep \
         (JSON, Markdown or CSV), then reload this tab to use the newer version."
    )
}

/// The advice for a request that failed: the key, the address, or the browser's CORS check.
const REQUEST_FAILED: &str = "Check the API key, the base URL and the model name. If the \
    browser blocked the request (CORS), the server must allow this page's origin: for Ollama \
    set OLLAMA_ORIGINS; a local server must send Access-Control-Allow-Origin.";

/// The advice for a request to the model in the tab that it could not answer: the page says
/// why the model could not be loaded (not a GGUF file, a download that broke, not enough
/// memory), and none of it is about keys or CORS.
const IN_TAB_FAILED: &str = "The model in this tab could not be loaded: read why above. A \
    download that broke resumes when you re-run (from the start if its server cannot resume); \
    a model this device has not the \
    memory for needs a smaller model (a smaller GGUF file); the model's URL must serve a \
    .gguf file to this page (CORS).";

/// What to do after a failure of `kind` (the core's `JobFailureKind` names) whose message is
/// `message`: [`what_to_do`], but for a request the model in the tab could not answer because
/// it could not be loaded (web/in-tab.js says so in the message).
pub fn advice(kind: &str, message: &str) -> &'static str {
    if matches!(kind, "provider" | "assess-request")
        && message.contains("could not be loaded in this tab")
    {
        IN_TAB_FAILED
    } else {
        what_to_do(kind)
    }
}

/// What to do after a failure of this kind (the core's `JobFailureKind` names).
pub fn what_to_do(kind: &str) -> &'static str {
    match kind {
        "provider" | "assess-request" => REQUEST_FAILED,
        "config" => "The check's settings were refused: check the provider's base URL and model.",
        "cancelled" => "The check was cancelled. Re-run it when you like.",
        "budget" => {
            "The run reached its spending limit before this check's next request: raise \
             \"Stop the run at $\" in the Provider section, then re-run it."
        }
        "no-new-evidence" => {
            "The corpus has nothing more that speaks to the claim: add evidence that does, \
             then re-run."
        }
        "research-turn-limit" => {
            "Research used all its turns: add more specific evidence or make the claim narrower."
        }
        "citation-not-in-evidence" => {
            "The model cited text that is not an evidence item: re-run, or use a stronger model."
        }
        "assess-prose" | "assess-schema" => {
            "The model did not record its assessment through the tool as asked: use a model \
             with reliable tool calling."
        }
        "invalid-submissions" | "no-submit" | "turn-limit" => {
            "The model did not finish its summary in the expected form: re-run, or use a \
             stronger model."
        }
        _ => "See the message above; re-run when it is fixed.",
    }
}

/// Tokens and cost in words.
pub fn usage_text(usage: &UsageView) -> String {
    format!("{} in / {} out tokens · {}", usage.input, usage.output, cost_text(usage))
}

/// The cost in words. Tokens spent at no cost mean the provider reported none and no price
/// was set (the core knows no prices): "not reported", never a reassuring "$0.0000".
pub fn cost_text(usage: &UsageView) -> String {
    if usage.cost == 0.0 && usage.input + usage.output > 0 {
        "cost not reported".to_owned()
    } else {
        format!("${}", fixed(usage.cost, 4))
    }
}

/// `n` and a noun, plural when `n` is not 1.
pub fn count(n: u32, noun: &str) -> String {
    match (n, noun.strip_suffix('y')) {
        (1, _) => format!("1 {noun}"),
        (_, Some(stem)) => format!("{n} {stem}ies"),
        _ => format!("{n} {noun}s"),
    }
}

/// What a failure spent, in words.
pub fn spent_text(spent: &SpentView) -> String {
    format!(
        "{}, {}, {} · {}",
        count(spent.requests, "request"),
        count(spent.turns, "turn"),
        count(spent.retries, "retry"),
        usage_text(&spent.usage)
    )
}

/// A verdict's confidence in words a person can act on: how far to rely on it, and what to
/// read first. High from 0.8, moderate from 0.6, low below; for `insufficient` the words say
/// what the corpus lacks rather than what a passage settles.
#[must_use]
pub fn confidence_words(verdict: &str, confidence: f64) -> &'static str {
    let band = if confidence >= 0.8 {
        0
    } else if confidence >= 0.6 {
        1
    } else {
        2
    };
    match (verdict == "insufficient", band) {
        (false, 0) => "high confidence: the cited passage settles it",
        (false, 1) => "moderate confidence: read the cited passage before relying on it",
        (false, _) => "low confidence: a lead to check, not an answer",
        (true, 0) => "high confidence: the corpus does not address this claim",
        (true, 1) => "moderate confidence: the corpus may touch on it; look at the evidence",
        (true, _) => "low confidence: a passage came close; read the evidence",
    }
}

/// `value` with `decimals` digits after the point, rounded half away from zero.
///
/// Written with integers rather than `{:.N}`: Rust's float formatting is about 4 KB gzip of the
/// page's wasm, and these few figures (a confidence, a cost, a size) need none of it.
pub fn fixed(value: f64, decimals: u32) -> String {
    let scale = 10_u64.pow(decimals);
    let scaled = (value.abs() * scale as f64).round() as u64;
    let sign = if value < 0.0 && scaled > 0 { "-" } else { "" };
    let (whole, fraction) = (scaled / scale, scaled % scale);
    if decimals == 0 {
        format!("{sign}{whole}")
    } else {
        format!("{sign}{whole}.{fraction:0width$}", width = decimals as usize)
    }
}

/// Where a result came from, in one line: the provider and its base URL, the model, the
/// corpus and its size, the app's version and the date.
pub fn provenance_text(provenance: &Provenance) -> String {
    let mut text = provenance.provider.clone();
    if let Some(base_url) = &provenance.base_url {
        text = format!("{text} at {base_url}");
    }
    if let Some(model) = &provenance.model {
        text = format!("{text}, model {model}");
    }
    let corpus = provenance.corpus.as_deref().unwrap_or("empty");
    format!(
        "{text} · corpus {corpus} ({}) · Verity {} · {}",
        count(u32::try_from(provenance.items).unwrap_or(u32::MAX), "item"),
        provenance.app_version,
        provenance.date
    )
}

/// `n` with a comma between each group of three digits (`1,000`).
pub fn thousands(n: usize) -> String {
    let digits = n.to_string();
    let mut out = String::with_capacity(digits.len() + digits.len() / 3);
    for (i, digit) in digits.chars().enumerate() {
        if i != 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(digit);
    }
    out
}

/// The Results section's filters: a key (`all`, a verdict, `failed` for a failure without
/// one; [`crate::Outcome::verdict_key`]) and its words.
pub const VERDICT_FILTERS: [(&str, &str); 5] = [
    ("all", "All"),
    ("supported", "Supported"),
    ("contradicted", "Contradicted"),
    ("insufficient", "Insufficient"),
    ("failed", "Failed"),
];

/// The results counted per filter, in words: "All 12 · Supported 5 · Contradicted 2 ·
/// Insufficient 3 · Failed 2", for `all` cards and the finished `results` by their
/// [`crate::Outcome::verdict_key`]s; then what they cost together ("· $0.2625 spent"), once
/// any cost something.
pub fn verdict_counts(all: usize, results: &[crate::CheckResult]) -> String {
    let counts = VERDICT_FILTERS.map(|(key, words)| {
        let n = if key == "all" {
            all
        } else {
            results.iter().filter(|result| result.outcome.verdict_key() == key).count()
        };
        format!("{words} {n}")
    });
    let cost: f64 = results
        .iter()
        .filter_map(|result| match &result.outcome {
            crate::Outcome::Report { report } => report.get("usage")?.get("cost"),
            crate::Outcome::Failed { failure } => failure.get("spent")?.get("usage")?.get("cost"),
        })
        .filter_map(serde_json::Value::as_f64)
        .filter(|cost| cost.is_finite() && *cost > 0.0)
        .sum();
    let counts = counts.join(" · ");
    if cost > 0.0 { format!("{counts} · ${} spent", fixed(cost, 4)) } else { counts }
}

#[cfg(test)]
mod tests {
    use super::{REQUEST_FAILED, advice, confidence_words, what_to_do};

    #[test]
    fn a_model_in_the_tab_that_could_not_be_loaded_gets_its_own_advice() {
        let message = "verifier request failed: HTTP 400: the model could not be loaded in this \
                       tab: the model does not fit in this device's memory";
        assert!(advice("assess-request", message).starts_with("The model in this tab"));
        assert!(advice("provider", message).starts_with("The model in this tab"));
        assert_eq!(advice("assess-request", "HTTP 401: bad key"), REQUEST_FAILED);
        assert_eq!(advice("budget", message), what_to_do("budget"));
    }

    #[test]
    fn a_confidence_is_told_in_words_with_what_to_do() {
        assert!(confidence_words("supported", 0.81).starts_with("high confidence"));
        assert!(confidence_words("contradicted", 0.8).contains("the cited passage settles it"));
        assert!(confidence_words("supported", 0.79).contains("read the cited passage"));
        assert!(confidence_words("supported", 0.59).starts_with("low confidence"));
        assert!(confidence_words("insufficient", 0.9).contains("does not address"));
        assert!(confidence_words("insufficient", 0.3).contains("read the evidence"));
        assert!(confidence_words("supported", f64::NAN).starts_with("low confidence"));
    }
}
