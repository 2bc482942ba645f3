//! What a claim check reports: the [`Verdict`], the [`Assessment`] the model recorded (and the
//! schema of its arguments), the [`Route`] the check took, the [`Summary`] sentence and the
//! whole [`Report`].

use std::sync::OnceLock;

use crate::schema::Schema;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};

use crate::message::Usage;
use crate::segment::Span;

pub use super::verdict::Verdict;

/// An assessment: exactly the arguments of the `record_assessment` call that validated,
/// undeclared properties kept.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Assessment {
    /// The verdict.
    pub verdict: Verdict,
    /// How sure, from 0 to 1.
    pub confidence: f64,
    /// Evidence items quoted whole.
    pub citations: Vec<String>,
    /// Why, if the model said.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rationale: Option<String>,
    /// Anything else the model put in its arguments.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// The schema of `record_assessment`'s arguments.
#[must_use]
pub fn assessment_schema() -> Value {
    let verdicts: Vec<Value> = ["supported", "contradicted", "insufficient"]
        .iter()
        .map(|v| json!({"type": "string", "const": v}))
        .collect();
    json!({
        "type": "object",
        "required": ["verdict", "confidence", "citations"],
        "properties": {
            "verdict": {"anyOf": verdicts},
            "confidence": {"type": "number", "minimum": 0, "maximum": 1},
            "citations": {"type": "array", "items": {"type": "string"}},
            "rationale": {"type": "string"}
        }
    })
}

/// [`assessment_schema`] narrowed for constrained decoding (see
/// [`ToolSpec::constrained`](crate::ToolSpec::constrained)) to what the check accepts, in
/// forms a grammar can hold (llama.cpp's grammar ignores numeric bounds): each citation is one
/// of the `evidence` items given, a conclusive verdict cites at least one, the confidence is
/// one of 0, 0.05, ..., 1, and the rationale is at most 300 characters. So a grammar-held
/// model can neither paraphrase a citation, nor answer out of range, nor write without end.
#[must_use]
pub fn constrained_assessment_schema(evidence: &[String]) -> Value {
    let confidence: Vec<Value> = (0..=20).map(|i| json!(f64::from(i) / 20.0)).collect();
    let citations = |min: usize| {
        if evidence.is_empty() {
            json!({"type": "array", "maxItems": 0})
        } else {
            json!({"type": "array", "items": {"type": "string", "enum": evidence},
                "minItems": min, "maxItems": evidence.len()})
        }
    };
    let answer = |verdicts: &[&str], min: usize| {
        json!({
            "type": "object",
            "required": ["verdict", "confidence", "citations"],
            "properties": {
                "verdict": {"enum": verdicts},
                "confidence": {"enum": confidence},
                "citations": citations(min),
                "rationale": {"type": "string", "maxLength": 300}
            },
            "additionalProperties": false
        })
    };
    if evidence.is_empty() {
        return answer(&["insufficient"], 0);
    }
    json!({"oneOf": [answer(&["supported", "contradicted"], 1), answer(&["insufficient"], 0)]})
}

/// The summary's schema narrowed for constrained decoding: one sentence of at most 300
/// characters, so a grammar-held model cannot write without end.
#[must_use]
pub fn constrained_summary_schema() -> Value {
    json!({
        "type": "object",
        "required": ["text"],
        "properties": {"text": {"type": "string", "minLength": 1, "maxLength": 300}},
        "additionalProperties": false
    })
}

/// The compiled schema of `record_assessment`'s arguments, built once per process: a claim
/// check uses it for every assessment (its document is the tool's parameters).
pub(crate) fn assessment_compiled() -> &'static Schema {
    static SCHEMA: OnceLock<Schema> = OnceLock::new();
    SCHEMA.get_or_init(|| {
        Schema::compile(assessment_schema()).expect("the assessment schema is valid")
    })
}

/// Which way a check went.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Route {
    /// One assessment was enough.
    #[serde(rename = "single call")]
    SingleCall,
    /// The first assessment was `insufficient`; research found more evidence and a second
    /// assessment decided.
    #[serde(rename = "agent escalation")]
    AgentEscalation,
}

impl Route {
    /// `"single call"` or `"agent escalation"`.
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            Route::SingleCall => "single call",
            Route::AgentEscalation => "agent escalation",
        }
    }
}

/// The one-sentence summary the summary step submits.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Summary {
    /// One sentence for a reader who has not seen the evidence.
    pub text: String,
}

/// What a check produced.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Report {
    /// The claim checked.
    pub claim: String,
    /// The final assessment (its citations checked against the evidence it was given).
    pub assessment: Assessment,
    /// Which way the check went.
    pub route: Route,
    /// The summary sentence.
    pub summary: String,
    /// Requests that reached the model.
    pub requests: u32,
    /// Tokens and cost over every request.
    pub usage: Usage,
    /// What the verifier route asked and scored, when it assessed (see
    /// [`super::AssessMode::Verifier`]); absent when the agent assessed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub verifier: Option<super::verifier::VerifierRecord>,
    /// The assessment's citations located in the corpus: passage id, quote and offsets.
    #[serde(default)]
    pub citations: Vec<Citation>,
}

/// A citation located in its passage (see [`super::cite::locate`]).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Citation {
    /// The passage's id; absent for evidence the host gave that the corpus lacks.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub passage: Option<String>,
    /// The words that hold the claim, verbatim from the passage.
    pub quote: String,
    /// Where the quote sits in the passage's text.
    pub span: Span,
    /// The passage's whole text, as cited.
    pub text: String,
}

impl Report {
    /// The report in a finished claim job's value (what [`crate::Job`]'s `finish` returns),
    /// typed; `None` for a value that is not a report (a step's value).
    #[must_use]
    pub fn from_job_value(value: &Value) -> Option<Self> {
        serde_json::from_value(value.clone()).ok()
    }
}
