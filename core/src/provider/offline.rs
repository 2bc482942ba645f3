//! The offline model: a deterministic baseline behind the provider interface, so the app works
//! with no key and no network. **It is not an LLM.** It reads the request as a model would
//! (the system prompt, the tools offered, the claim and the delimited evidence) and answers with
//! tool calls:
//!
//! - `record_assessment`: the evidence item with the most lexical overlap with the claim; below
//!   an overlap threshold the verdict is `insufficient`; otherwise a number of the claim missing
//!   from the item, a negation on one side only, or an antonym pair makes it `contradicted`,
//!   else `supported`. The citation is the chosen item, quoted as shown.
//! - `lookup_evidence`: once, with the claim's content words as the query; then a short note.
//! - `submit`: for a `{text}` schema, one sentence built from the assessment in the task; for
//!   a sentence to split into claims, the sentence itself as the one claim; for
//!   other schemas, the smallest value the schema's `required`/`type`/`enum`/`const`/`minimum`
//!   keywords describe.

use std::collections::HashSet;

use serde_json::{Map, Value, json};

use crate::claim::prompt::{assessment_in, claim_in, evidence_in, sentence_in};
use crate::claim::{LOOKUP_EVIDENCE, RECORD_ASSESSMENT};
use crate::drive::Transport;
use crate::message::{AssistantMessage, ContentBlock, Message, ModelRequest, ToolCall, Usage};
use crate::step::SUBMIT;

/// The name hosts show for this model; say "baseline" wherever it appears.
pub const OFFLINE_MODEL_NAME: &str = "offline baseline (deterministic, not an LLM)";

/// Below this share of the claim's content words found in the best item, the verdict is
/// `insufficient`. Chosen among 0.5, 0.6 and 0.7 on the VitaminC dev claims (0.49, 0.51, 0.51
/// accuracy; 0.6 keeps the verdicts most balanced), so the dev figure is slightly optimistic.
const OVERLAP_THRESHOLD: f64 = 0.6;

const STOPWORDS: &[&str] = &[
    "a", "an", "and", "are", "as", "at", "be", "been", "by", "for", "from", "had", "has", "have",
    "he", "her", "his", "in", "is", "it", "its", "of", "on", "or", "she", "that", "the", "their",
    "they", "this", "to", "was", "were", "which", "who", "will", "with", "lrb", "rrb",
];

const NEGATIONS: &[&str] =
    &["not", "no", "never", "none", "nobody", "nothing", "neither", "nor", "without", "cannot"];

const ANTONYMS: &[(&str, &str)] = &[
    ("more", "less"),
    ("more", "fewer"),
    ("higher", "lower"),
    ("before", "after"),
    ("increase", "decrease"),
    ("increased", "decreased"),
    ("first", "last"),
    ("over", "under"),
    ("above", "below"),
    ("positive", "negative"),
    ("won", "lost"),
    ("male", "female"),
    ("alive", "dead"),
    ("larger", "smaller"),
    ("largest", "smallest"),
    ("older", "younger"),
    ("early", "late"),
    ("only", "also"),
];

/// The offline model.
#[derive(Debug, Clone, Copy, Default)]
pub struct OfflineModel;

impl Transport for OfflineModel {
    async fn complete(&self, request: ModelRequest<'_>) -> AssistantMessage {
        respond(request)
    }
}

/// Answers one request.
#[must_use]
pub fn respond(request: ModelRequest<'_>) -> AssistantMessage {
    let offers = |name: &str| request.tools.iter().any(|tool| tool.name == name);
    let call_number =
        request.messages.iter().filter(|m| matches!(m, Message::Assistant(_))).count();
    let id = |name: &str| format!("offline-{name}-{call_number}");
    let mut response = if offers(RECORD_ASSESSMENT) {
        let task = request.task().unwrap_or_default();
        tool_call(id("assess"), RECORD_ASSESSMENT, assess(task))
    } else if offers(LOOKUP_EVIDENCE) {
        if call_number == 0 {
            let query =
                content_words(claim_of_research(request.task().unwrap_or_default())).join(" ");
            tool_call(id("lookup"), LOOKUP_EVIDENCE, json!({ "query": query }))
        } else {
            AssistantMessage::text("I looked the claim up in the corpus; the results are above.")
        }
    } else if let Some(submit) = request.tools.iter().find(|tool| tool.name == SUBMIT) {
        let value = if requires_text(&submit.parameters) {
            json!({ "text": summarize(request.task().unwrap_or_default()) })
        } else if let Some(sentence) = request.task().and_then(sentence_in) {
            // A decomposition: the sentence as its one claim (the baseline splits nothing).
            json!({ "claims": [sentence] })
        } else {
            minimal_value(&submit.parameters)
        };
        tool_call(id("submit"), SUBMIT, value)
    } else {
        AssistantMessage::text("The offline baseline has no tool to answer with.")
    };
    response.usage = Usage::default();
    response
}

fn tool_call(id: String, name: &str, arguments: Value) -> AssistantMessage {
    AssistantMessage::from_content(vec![ContentBlock::ToolCall(ToolCall {
        id,
        name: name.to_owned(),
        arguments,
    })])
}

fn claim_of_research(task: &str) -> &str {
    claim_in(task).unwrap_or(task)
}

fn words(text: &str) -> Vec<String> {
    crate::retrieve::tokenize::lower_words(text).collect()
}

fn content_words(text: &str) -> Vec<String> {
    let mut seen = HashSet::new();
    words(text)
        .into_iter()
        .filter(|w| !STOPWORDS.contains(&w.as_str()) && seen.insert(w.clone()))
        .collect()
}

fn numbers(words: &[String]) -> HashSet<&str> {
    words.iter().filter(|w| w.chars().any(|c| c.is_ascii_digit())).map(String::as_str).collect()
}

fn negated(text: &str, words: &[String]) -> bool {
    text.to_lowercase().contains("n't") || words.iter().any(|w| NEGATIONS.contains(&w.as_str()))
}

/// The assessment of the claim and evidence in an assessment prompt.
fn assess(task: &str) -> Value {
    let claim = claim_in(task).unwrap_or_default();
    let evidence = evidence_in(task);
    let claim_words = content_words(claim);
    let best = evidence
        .iter()
        .enumerate()
        .map(|(index, item)| {
            let item_words: HashSet<String> = content_words(item).into_iter().collect();
            let shared = claim_words.iter().filter(|w| item_words.contains(*w)).count();
            #[allow(clippy::cast_precision_loss)]
            let overlap = shared as f64 / claim_words.len().max(1) as f64;
            (index, overlap)
        })
        // The highest overlap; the earliest item on ties.
        .fold(None, |best: Option<(usize, f64)>, (index, overlap)| match best {
            Some((_, top)) if top >= overlap => best,
            _ => Some((index, overlap)),
        });
    let Some((index, overlap)) = best.filter(|(_, overlap)| *overlap >= OVERLAP_THRESHOLD) else {
        return json!({
            "verdict": "insufficient",
            "confidence": 0.3,
            "citations": [],
            "rationale": "Baseline: no evidence item shares enough words with the claim."
        });
    };
    let item = evidence[index];
    let claim_all = words(claim);
    let item_all = words(item);
    let claim_numbers = numbers(&claim_all);
    let item_numbers = numbers(&item_all);
    let number_clash =
        !item_numbers.is_empty() && claim_numbers.iter().any(|n| !item_numbers.contains(n));
    let negation_clash = negated(claim, &claim_all) != negated(item, &item_all);
    let has = |words: &[String], w: &str| words.iter().any(|x| x == w);
    let antonym_clash = ANTONYMS.iter().any(|(a, b)| {
        (has(&claim_all, a) && has(&item_all, b) && !has(&item_all, a))
            || (has(&claim_all, b) && has(&item_all, a) && !has(&item_all, b))
    });
    let (verdict, rationale) = if number_clash {
        ("contradicted", "Baseline: the claim's numbers differ from the evidence's.")
    } else if negation_clash {
        ("contradicted", "Baseline: a negation on one side only.")
    } else if antonym_clash {
        ("contradicted", "Baseline: the claim and the evidence use opposite words.")
    } else {
        ("supported", "Baseline: the evidence repeats the claim's words.")
    };
    let confidence = (0.4 + 0.5 * overlap).min(0.9);
    json!({
        "verdict": verdict,
        "confidence": (confidence * 100.0).round() / 100.0,
        "citations": [item],
        "rationale": rationale
    })
}

fn requires_text(schema: &Value) -> bool {
    schema["properties"]["text"]["type"] == "string"
        && schema["required"].as_array().is_some_and(|r| r.iter().any(|v| v == "text"))
}

/// One sentence from the assessment JSON the summary step is given (delimited).
fn summarize(task: &str) -> String {
    let json = assessment_in(task).unwrap_or(task);
    let assessment: Value = serde_json::from_str(json).unwrap_or(Value::Null);
    let cited = assessment["citations"].as_array().map_or(0, Vec::len);
    match assessment["verdict"].as_str() {
        Some("supported") => {
            format!("The evidence supports the claim ({cited} item(s) cited; offline baseline).")
        }
        Some("contradicted") => {
            format!("The evidence contradicts the claim ({cited} item(s) cited; offline baseline).")
        }
        _ => "The evidence is not enough to decide the claim (offline baseline).".to_owned(),
    }
}

/// The most characters and items the offline model writes in one answer: a schema (a job
/// config's, untrusted) may ask for a `minLength` or `minItems` of 10^15. Past it the value
/// falls short of the schema, and validation says so (a typed failure, not an allocation).
pub const MINIMAL_VALUE_BUDGET: u64 = 64 * 1024;

/// The smallest value a schema describes, from its common keywords, within
/// [`MINIMAL_VALUE_BUDGET`].
fn minimal_value(schema: &Value) -> Value {
    let mut budget = MINIMAL_VALUE_BUDGET;
    minimal_within(schema, &mut budget)
}

/// [`minimal_value`] that spends `budget` (characters and items) as it writes.
fn minimal_within(schema: &Value, budget: &mut u64) -> Value {
    if let Some(value) = schema.get("const") {
        return value.clone();
    }
    if let Some(first) = schema.get("enum").and_then(Value::as_array).and_then(|e| e.first()) {
        return first.clone();
    }
    if let Some(first) = ["anyOf", "oneOf"]
        .iter()
        .find_map(|k| schema.get(*k).and_then(Value::as_array).and_then(|v| v.first()))
    {
        return minimal_within(first, budget);
    }
    let kind = match &schema["type"] {
        Value::Array(kinds) => kinds.first().and_then(Value::as_str).unwrap_or("null"),
        Value::String(kind) => kind.as_str(),
        _ if schema.get("properties").is_some() => "object",
        _ => "null",
    };
    match kind {
        "object" => {
            let mut object = Map::new();
            for name in
                schema["required"].as_array().into_iter().flatten().filter_map(Value::as_str)
            {
                if *budget == 0 {
                    break;
                }
                *budget -= 1;
                object.insert(name.to_owned(), minimal_within(&schema["properties"][name], budget));
            }
            Value::Object(object)
        }
        "array" => {
            let mut items = Vec::new();
            for _ in 0..schema["minItems"].as_u64().unwrap_or(0) {
                if *budget == 0 {
                    break;
                }
                *budget -= 1;
                items.push(minimal_within(&schema["items"], budget));
            }
            Value::Array(items)
        }
        "string" => {
            let length = schema["minLength"].as_u64().unwrap_or(0).min(*budget);
            *budget -= length;
            Value::String("x".repeat(usize::try_from(length).unwrap_or(0)))
        }
        "integer" | "number" => schema.get("minimum").cloned().unwrap_or(json!(0)),
        "boolean" => json!(false),
        _ => Value::Null,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::claim::prompt::assessment_prompt;

    fn assessment(claim: &str, evidence: &[&str]) -> Value {
        let evidence: Vec<String> = evidence.iter().map(|s| (*s).to_owned()).collect();
        assess(&assessment_prompt(claim, &evidence))
    }

    #[test]
    fn supports_contradicts_or_abstains() {
        let item = "Tye Sheridan: Tye Kayle Sheridan is an American actor born in 1996 .";
        let other = "Westlife sold 13 million albums .";
        let supported = assessment("Tye Sheridan is an American actor .", &[other, item]);
        assert_eq!(supported["verdict"], "supported");
        assert_eq!(supported["citations"], json!([item]));
        assert_eq!(
            assessment("Tye Sheridan was born in 1994 .", &[item])["verdict"],
            "contradicted"
        );
        assert_eq!(
            assessment("Tye Sheridan is not an American actor .", &[item])["verdict"],
            "contradicted"
        );
        assert_eq!(assessment("Quarterly revenue grew .", &[item])["verdict"], "insufficient");
    }

    #[test]
    fn minimal_values_follow_the_schema() {
        let schema = json!({"type": "object", "required": ["severity", "score", "tags"], "properties": {
            "severity": {"anyOf": [{"const": "low"}, {"const": "high"}]},
            "score": {"type": "integer", "minimum": 1},
            "tags": {"type": "array", "items": {"type": "string", "minLength": 2}, "minItems": 1}}});
        assert_eq!(minimal_value(&schema), json!({"severity": "low", "score": 1, "tags": ["xx"]}));
    }

    /// A schema that asks for 10^15 items of 10^12 characters each gets an answer of at most
    /// the budget, at once (it used to allocate what it asked).
    #[test]
    fn a_huge_minimum_is_not_allocated() {
        let schema = json!({"type": "object", "required": ["a", "b"], "properties": {
            "a": {"type": "array", "minItems": 1_000_000_000_000_000u64,
                  "items": {"type": "string", "minLength": 1_000_000_000_000u64}},
            "b": {"type": "string", "minLength": u64::MAX}}});
        let value = minimal_value(&schema);
        let size = serde_json::to_string(&value).unwrap().len() as u64;
        assert!(size < 2 * MINIMAL_VALUE_BUDGET + 64, "{size} bytes");
    }
}
